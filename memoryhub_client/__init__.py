"""MemoryHub's client: the Python SDK (`MemoryHub`, `AsyncMemoryHub`), the context manager
for agents that run their own loop (`ContextManager`), and the `memoryhub` command built on
them. Over HTTP only: nothing here imports Django or the server's apps; it runs where an
agent runs, with no database and no settings (docs/sdk.md).

    from memoryhub_client import MemoryHub

    with MemoryHub("https://memory.example", token, team="acme") as hub:
        hub.save("deploy-friday", "Never deploy on Fridays.", type="lesson")
        for hit in hub.search("can we ship on Friday?")["results"]:
            print(hit["key"], hit["score"])
"""

from memoryhub_client.context import (
    CallableCounter,
    ChatSummariser,
    ContextManager,
    EncodingCounter,
    Event,
    FlushPolicy,
    HeuristicCounter,
    HeuristicRates,
    RuleSummariser,
    Summariser,
    Thresholds,
    TokenCounter,
    counter_for,
    window_of,
)
from memoryhub_client.errors import (
    Conflict,
    Forbidden,
    InvalidRequest,
    MemoryHubError,
    NotFound,
    RateLimited,
    ServerError,
    ServerUnavailable,
    ServerUnreachable,
    Unauthenticated,
    UnexpectedAnswer,
)
from memoryhub_client.hub import AsyncMemoryHub, MemoryHub
from memoryhub_client.operations import Page, SaveAnswer, cursor_of, is_duplicate
from memoryhub_client.transport import RetryPolicy

__all__ = [
    "AsyncMemoryHub",
    "CallableCounter",
    "ChatSummariser",
    "Conflict",
    "ContextManager",
    "EncodingCounter",
    "Event",
    "FlushPolicy",
    "Forbidden",
    "HeuristicCounter",
    "HeuristicRates",
    "InvalidRequest",
    "MemoryHub",
    "MemoryHubError",
    "NotFound",
    "Page",
    "RateLimited",
    "RetryPolicy",
    "RuleSummariser",
    "SaveAnswer",
    "ServerError",
    "ServerUnavailable",
    "ServerUnreachable",
    "Summariser",
    "Thresholds",
    "TokenCounter",
    "Unauthenticated",
    "UnexpectedAnswer",
    "counter_for",
    "cursor_of",
    "is_duplicate",
    "window_of",
]

# What docs/sdk.md's reference documents, in this order (tests/client/sdk_codegen.py).
REFERENCE = (
    ("Clients", ("MemoryHub", "AsyncMemoryHub", "RetryPolicy", "Page", "cursor_of", "is_duplicate")),
    (
        "Context manager",
        (
            "ContextManager",
            "Thresholds",
            "FlushPolicy",
            "Event",
            "Summariser",
            "RuleSummariser",
            "ChatSummariser",
            "TokenCounter",
            "EncodingCounter",
            "HeuristicCounter",
            "HeuristicRates",
            "CallableCounter",
            "counter_for",
            "window_of",
        ),
    ),
    (
        "Errors",
        (
            "MemoryHubError",
            "InvalidRequest",
            "Unauthenticated",
            "Forbidden",
            "NotFound",
            "Conflict",
            "RateLimited",
            "ServerUnavailable",
            "ServerError",
            "ServerUnreachable",
            "UnexpectedAnswer",
        ),
    ),
)
