"""A LlamaIndex memory block over MemoryHub (`pip install memoryhub[llamaindex]`).

`MemoryHubMemoryBlock` is a `llama_index.core.memory.BaseMemoryBlock` for
`Memory.from_defaults(memory_blocks=[...])`: when the agent's memory is read, it brings
the team's memories most relevant to the latest user message (or, before there is one,
the team's memory block), and the messages that `Memory` flushes out of its short-term
queue go to MemoryHub's extractor, which proposes what to remember as drafts for review.
It runs on `AsyncMemoryHub`, as LlamaIndex's memory is asynchronous. Reads fail open: when
the server cannot answer, the block is empty and the agent goes on.

`tokenizer_for(model)` is a `tokenizer_fn` for `Memory` that counts offline (LlamaIndex's
default downloads tiktoken's files on first use)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

try:
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.bridge.pydantic import Field
    from llama_index.core.memory import BaseMemoryBlock
except ImportError as exc:  # pragma: no cover - exercised without the extra only
    raise ImportError(
        "the LlamaIndex adapter needs llama-index-core: pip install memoryhub[llamaindex]"
    ) from exc

from memoryhub_client.context.summaries import transcript_of
from memoryhub_client.context.tokens import counter_for
from memoryhub_client.errors import MemoryHubError
from memoryhub_client.hub import AsyncMemoryHub
from memoryhub_client.operations import MAX_SOURCE_SESSION_CHARS, MAX_TRANSCRIPT_CHARS

logger = logging.getLogger("memoryhub_client.adapters")
MAX_QUERY_CHARS = 2000


class MemoryHubMemoryBlock(BaseMemoryBlock[str]):
    """The team's memory as a LlamaIndex memory block (`hub`: an `AsyncMemoryHub`)."""

    name: str = Field(default="memoryhub", description="The block's name in the memory template.")
    description: str | None = Field(
        default="What the team remembers, from MemoryHub.", description="A description of the block."
    )
    hub: AsyncMemoryHub = Field(description="The team's MemoryHub (AsyncMemoryHub).")
    project: str | None = Field(default=None, description="Only this project's memories (and team-wide).")
    max_results: int = Field(default=5, description="How many relevant memories to bring.")
    source_session: str = Field(default="llamaindex", description="The drafts' source session label.")

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        query = _latest_user_text(messages or [])
        try:
            if query:
                answer = await self.hub.search(
                    query[:MAX_QUERY_CHARS], max_results=self.max_results, project=self.project
                )
                return "\n".join(
                    f"[{hit['type'].upper()}] [{hit['key']}]: {' '.join(hit['snippet'].split())}"
                    for hit in answer["results"]
                    if hit["is_active"]
                )
            return (await self.hub.context(project=self.project))["text"]
        except MemoryHubError as exc:
            logger.warning("MemoryHub memory block left empty: %s", exc)
            return ""

    async def _aput(self, messages: list[ChatMessage]) -> None:
        turns = [{"role": str(message.role.value), "content": message.content or ""} for message in messages]
        text = transcript_of(turns, tool_results=False)[:MAX_TRANSCRIPT_CHARS]
        if not text.strip():
            return
        try:
            await self.hub.extract_drafts(text, source_session=self.source_session[:MAX_SOURCE_SESSION_CHARS])
        except MemoryHubError as exc:
            # The short-term queue has moved on: what it flushed is lost to MemoryHub, not
            # to the agent's session. Said loudly, never raised into the agent's loop.
            logger.warning("MemoryHub did not take the flushed messages: %s", exc)


def _latest_user_text(messages: list[ChatMessage]) -> str:
    for message in reversed(messages):
        if str(message.role.value) == "user" and message.content:
            return str(message.content)
    return ""


def tokenizer_for(model: str) -> Callable[[str], list[int]]:
    """A `tokenizer_fn` for LlamaIndex's `Memory` that counts `model`'s tokens offline
    (its length is the count; the items mean nothing)."""
    counter = counter_for(model)

    def tokenize(text: str) -> list[int]:
        return [0] * counter.count(text)

    return tokenize
