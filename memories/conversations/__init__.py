"""Conversations: session transcripts a team keeps for a while (docs/conversations.md).

A conversation is an ordered list of lines (a role and a text each), scrubbed of
credentials and the team's vault secrets before it is stored, bounded like the text the
draft extractors read, and deleted once older than the team's retention. Its modules:
the tables (`models.py`), every write and the retention sweep (`services.py`), the
reads (`selectors.py`), what the doors accept (`inputs.py`) and the REST door
(`api.py`). Search chunks and embeds its lines (search.conversation_index)."""
