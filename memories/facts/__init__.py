"""Facts: exact answers, `(entity, key) -> value` within a team (docs/facts.md).

A fact is versioned like a memory (a different value supersedes the active one with a
reason; history is kept; `as_of` reads), but it is not text to search: it is looked up
by its entity and key. Its own modules: the table (`models.py`), every write
(`services.py`), the reads (`selectors.py`), what the doors accept (`inputs.py`) and
the REST door (`api.py`, with the answers' shape in `serializers.py`)."""
