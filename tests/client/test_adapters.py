"""The LangChain and LlamaIndex adapters against the real server: the team's memory comes
into the framework's context, and what the framework lets go of goes to MemoryHub's
extractor as drafts."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory

from freshness.models import Draft
from memoryhub_client import AsyncMemoryHub, ContextManager, FlushPolicy, MemoryHub
from memoryhub_client.adapters.langchain import MemoryHubChatMessageHistory
from memoryhub_client.adapters.llamaindex import MemoryHubMemoryBlock, tokenizer_for
from teams.models import Team
from tests.conftest import make_agent, operator_view
from tests.mcp.conftest import Server, run_async

pytestmark = pytest.mark.django_db(transaction=True)


def drafts_of(team: Team) -> list[str]:
    with operator_view():
        return sorted(Draft.objects.filter(team=team).values_list("content", flat=True))


def test_a_langchain_history_carries_the_teams_memory_and_flushes_to_drafts(
    mcp_server: Server, team: Team
) -> None:
    token = make_agent(team, "langchain-bot", ["read", "write"]).token
    with MemoryHub(mcp_server.base, token, team="alpha") as hub:
        hub.save("deploy-friday", "Never deploy on Fridays.", type="lesson")
        manager = ContextManager("gpt-4o", hub, window=100_000, flush=FlushPolicy(source_session="lc"))
        manager.inject_memory()
        # langchain-core deprecates BaseChatMessageHistory (the adapter's docstring says so).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            history = MemoryHubChatMessageHistory(manager)
        history.add_messages(
            [
                HumanMessage("We decided to move the queue from RabbitMQ to Redis streams."),
                AIMessage("", tool_calls=[{"name": "check_queue", "args": {"name": "jobs"}, "id": "c1"}]),
                ToolMessage("jobs: 0 pending", tool_call_id="c1"),
                AIMessage("Noted: Redis streams from now on."),
            ]
        )
        read = history.messages
        history.clear()  # flushes what was not written yet, then forgets the turns
        after = history.messages

    assert isinstance(read[0], SystemMessage) and "Never deploy on Fridays." in str(read[0].content)
    assert [type(m) for m in read[1:]] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert isinstance(read[2], AIMessage) and read[2].tool_calls[0]["id"] == "c1"
    assert "We decided to move the queue from RabbitMQ to Redis streams." in drafts_of(team)
    assert [type(m) for m in after] == [SystemMessage]


def test_a_llamaindex_memory_block_brings_relevant_memories_and_takes_flushed_messages(
    mcp_server: Server, team: Team
) -> None:
    token = make_agent(team, "llama-bot", ["read", "write"]).token
    with MemoryHub(mcp_server.base, token, team="alpha") as hub:
        hub.save("payments", "We use Stripe for card payments.", type="decision")
        hub.save("deploy-friday", "Never deploy on Fridays.", type="lesson")

    async def scenario() -> dict[str, Any]:
        async with AsyncMemoryHub(mcp_server.base, token, team="alpha") as hub:
            block = MemoryHubMemoryBlock(hub=hub, source_session="llama")
            memory = Memory.from_defaults(
                session_id="llama-test",
                token_limit=120,
                token_flush_size=40,
                chat_history_token_ratio=0.5,
                memory_blocks=[block],
                tokenizer_fn=tokenizer_for("gpt-4o"),
            )
            opening = await block.aget([])
            await memory.aput_messages(
                [
                    ChatMessage(role="user", content="We decided to keep all invoices for ten years."),
                    ChatMessage(role="assistant", content="Understood, ten years for invoices."),
                ]
            )
            for n in range(6):
                await memory.aput(
                    ChatMessage(role="user", content=f"Turn {n}: how do we take card payments?")
                )
                await memory.aput(ChatMessage(role="assistant", content=f"Answer {n}: through the provider."))
            got = await memory.aget()
            return {"opening": opening, "got": got}

    result = run_async(scenario())
    system = result["got"][0]

    assert "Never deploy on Fridays." in result["opening"]
    assert system.role.value == "system" and "[DECISION] [payments]: We use Stripe for card payments." in str(
        system.content
    )
    assert "We decided to keep all invoices for ten years." in drafts_of(team)
