"""Identifier-like queries: a query that is one or two tokens, one of them shaped like
an identifier (`deploy_fri`, `ERR_4711`, `zq-marker-93`, `billingSvcV2`, `INC-20417`).

Such a query names a string that one entry holds; the local model has never seen the
token, so its cosines are noise, and under the team's usual weights (vector 0.7) that
noise outranks the keyword path's exact hit. For these queries the keyword path leads
(search.retrieval.scoring: it takes the larger of the team's two weights). A token is
identifier-shaped when it holds
- a decimal digit (`v2`, `4711`, `ingestmark00042`),
- an underscore (`deploy_fri`),
- a lower-case letter followed by an upper-case one (`billingSvc`), or
- one of `-` `.` `:` `/` `@` between two letters or digits (`zq-marker-93`, `api.v2`).

Shape only: no vocabulary, no statement, so the decision is the same at every door and
explainable from the query alone. One pass over the query's characters, no pattern: a
query of more than MAX_TOKENS tokens is refused after the split, whatever its length.
"""

from __future__ import annotations

MAX_TOKENS = 2
JOINERS = frozenset("-.:/@")


def is_identifier_query(query: str) -> bool:
    """At most MAX_TOKENS whitespace-separated tokens, one of them identifier-shaped."""
    tokens = query.split(maxsplit=MAX_TOKENS)
    return 0 < len(tokens) <= MAX_TOKENS and any(is_identifier_token(token) for token in tokens)


def is_identifier_token(token: str) -> bool:
    """The token holds a digit or `_`, a camelCase inner capital, or a joiner between two
    letters or digits (module docstring). Linear in the token."""
    previous = ""
    for i, ch in enumerate(token):
        if ch.isdecimal() or ch == "_":
            return True
        if previous.islower() and ch.isupper():
            return True
        if ch in JOINERS and previous.isalnum() and i + 1 < len(token) and token[i + 1].isalnum():
            return True
        previous = ch
    return False
