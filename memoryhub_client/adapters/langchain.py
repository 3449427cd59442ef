"""A LangChain chat message history over `ContextManager` (`pip install memoryhub[langchain]`).

`MemoryHubChatMessageHistory` is a `langchain_core.chat_history.BaseChatMessageHistory`,
for `RunnableWithMessageHistory` and anything else that reads a history's `messages` and
calls `add_messages`: its messages are the context a `ContextManager` keeps within the
model's window, the team's memory block at the top (`inject_memory`), and what the
conversation says worth remembering goes to MemoryHub as the thresholds flush it. The
conversation itself stays in this process, like LangChain's `InMemoryChatMessageHistory`.

langchain-core marks `BaseChatMessageHistory` deprecated since 1.6.4 (to be removed in
2.0, hence the extra's `<2`): it warns when a history is made."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import BaseMessage, convert_to_messages, convert_to_openai_messages
except ImportError as exc:  # pragma: no cover - exercised without the extra only
    raise ImportError("the LangChain adapter needs langchain-core: pip install memoryhub[langchain]") from exc

from memoryhub_client.context import ContextManager
from memoryhub_client.hub import MemoryHub


class MemoryHubChatMessageHistory(BaseChatMessageHistory):
    """A chat history kept by `manager` (a `ContextManager`), or by one made here for
    `model` and `hub` with the other keyword arguments of `ContextManager`."""

    def __init__(
        self,
        manager: ContextManager | None = None,
        *,
        model: str | None = None,
        hub: MemoryHub | None = None,
        **options: Any,
    ) -> None:
        super().__init__()
        if manager is None:
            if model is None:
                raise ValueError("give a ContextManager, or the model (and a hub) to make one")
            manager = ContextManager(model, hub, **options)
        self.manager = manager

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The context as LangChain messages: the system prompt, memory block and summary as
        system messages, then the turns."""
        return list(convert_to_messages(self.manager.messages()))

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Add the messages to the context (the thresholds run after each)."""
        self.manager.extend(convert_to_openai_messages(list(messages)))

    def clear(self) -> None:
        """Forget the conversation's turns and summary, after flushing what was not yet
        written to MemoryHub; the system prompt and the memory block stay."""
        self.manager.clear()
