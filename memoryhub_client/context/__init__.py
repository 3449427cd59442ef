"""The context manager for agents that run their own loop (manager.py), with what it
stands on: token counting (tokens.py), the models' windows (windows.py) and the summaries
that replace folded turns (summaries.py)."""

from memoryhub_client.context.manager import ContextManager, Event, FlushPolicy, Thresholds
from memoryhub_client.context.summaries import ChatSummariser, RuleSummariser, Summariser
from memoryhub_client.context.tokens import (
    CallableCounter,
    EncodingCounter,
    HeuristicCounter,
    HeuristicRates,
    TokenCounter,
    counter_for,
)
from memoryhub_client.context.windows import MODEL_WINDOWS, encoding_of, window_of

__all__ = [
    "MODEL_WINDOWS",
    "CallableCounter",
    "ChatSummariser",
    "ContextManager",
    "EncodingCounter",
    "Event",
    "FlushPolicy",
    "HeuristicCounter",
    "HeuristicRates",
    "RuleSummariser",
    "Summariser",
    "Thresholds",
    "TokenCounter",
    "counter_for",
    "encoding_of",
    "window_of",
]
