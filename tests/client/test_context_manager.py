"""ContextManager without a server (hub=None: nothing to flush to): what it keeps, folds
and drops at each threshold, tool calls with their results, windows and token counters,
and the summarisers (the model's behind a local chat-completions endpoint)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from memoryhub_client import (
    ChatSummariser,
    ContextManager,
    EncodingCounter,
    HeuristicCounter,
    RuleSummariser,
    Thresholds,
    counter_for,
    window_of,
)
from memoryhub_client.context.tokens import message_tokens


def words(text: str) -> int:
    return len(text.split())


def manager(window: int = 1000, **options: Any) -> ContextManager:
    return ContextManager(
        "some-model", window=window, counter=words, system="You are the build agent.", **options
    )


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def tool_call(call_id: str, name: str = "run_tests") -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps({"path": "tests/"})}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def tool_result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def assert_every_tool_result_follows_its_call(messages: list[dict[str, Any]]) -> None:
    open_calls: set[str] = set()
    for message in messages:
        if message.get("tool_calls"):
            open_calls = {call["id"] for call in message["tool_calls"]}
        elif message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, f"orphan tool result {message['tool_call_id']}"
        else:
            open_calls = set()


def test_below_the_thresholds_everything_is_kept_as_given() -> None:
    context = manager()
    events = context.extend([user("Run the tests please."), tool_call("c1"), tool_result("c1", "12 passed")])

    assert events == []
    assert [m["role"] for m in context.messages()] == ["system", "user", "assistant", "tool"]
    assert context.tokens == sum(message_tokens(m, context.counter) for m in context.messages()) + 3


def test_compaction_folds_the_oldest_turns_into_a_summary_and_keeps_the_newest() -> None:
    context = manager(window=1000)
    for n in range(40):
        context.add(user(f"Turn {n}: " + "word " * 15))

    kinds = [event.kind for event in context.events]
    texts = [m["content"] for m in context.messages()]

    assert "compacted" in kinds and "pruned" not in kinds
    assert texts[0] == "You are the build agent."
    summary = context.summary.splitlines()
    assert texts[1].startswith("Summary of the earlier conversation:")
    assert summary and all(line.startswith("- user: Turn ") for line in summary)
    assert words(context.summary) + len(summary) <= 0.05 * 1000  # the newest lines that fit its budget
    assert texts[-4:] == [f"Turn {n}: " + "word " * 15 for n in range(36, 40)]
    assert context.usage < Thresholds().compact


def test_a_large_tool_result_is_pruned_with_its_call_never_the_system_prompt_or_memory() -> None:
    context = manager(window=1000)
    context.set_memory("[LESSON] [deploy-friday]: Never deploy on Fridays.")
    context.add(user("Look at the log."))
    context.extend([tool_call("c1", "read_log"), tool_result("c1", "line " * 850)])
    context.add(user("And now?"))

    kinds = [event.kind for event in context.events]
    messages = context.messages()

    assert kinds.count("warned") == 1 and "pruned" in kinds
    assert messages[0]["content"] == "You are the build agent."
    assert "Never deploy on Fridays." in messages[1]["content"]
    assert not any(m.get("tool_calls") or m["role"] == "tool" for m in messages)  # gone together
    assert messages[-1]["content"] == "And now?"
    assert context.usage <= Thresholds().prune


def test_parallel_tool_calls_and_anthropic_tool_use_stay_with_their_results() -> None:
    context = manager(window=600, thresholds=Thresholds(keep_recent=2))
    for n in range(30):
        calls = [{"id": f"a{n}", "function": {"name": "grep", "arguments": "{}"}},
                 {"id": f"b{n}", "function": {"name": "ls", "arguments": "{}"}}]  # fmt: skip
        context.add({"role": "assistant", "content": "Two calls.", "tool_calls": calls})
        context.add(tool_result(f"a{n}", "match " * 5))
        context.add(tool_result(f"b{n}", "file " * 5))
        context.add(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{n}", "name": "cat", "input": {}}],
            }
        )
        context.add(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": "text"}]}
        )

    messages = context.messages()
    assert_every_tool_result_follows_its_call(messages)
    uses = [
        p["id"]
        for m in messages
        if isinstance(m["content"], list)
        for p in m["content"]
        if p["type"] == "tool_use"
    ]
    results = [p["tool_use_id"] for m in messages if isinstance(m["content"], list)
               for p in m["content"] if p["type"] == "tool_result"]  # fmt: skip
    assert uses == results and uses


def test_the_warning_comes_once_each_time_the_context_passes_it() -> None:
    context = manager(window=120, thresholds=Thresholds(flush=0.7, compact=0.8, warn=0.8, prune=0.99))
    context.add(user("word " * 80))
    context.add(user("more"))

    assert [event.kind for event in context.events] == ["warned"]


def test_clear_keeps_the_system_prompt_and_the_memory() -> None:
    context = manager()
    context.set_memory("[IDENTITY] [who]: The payments team.")
    context.extend([user("one"), user("two")])

    context.clear()

    assert [m["role"] for m in context.messages()] == ["system", "system"]


def test_thresholds_must_rise_and_targets_sit_below_them() -> None:
    with pytest.raises(ValueError):
        Thresholds(flush=0.8, compact=0.7)
    with pytest.raises(ValueError):
        Thresholds(compact_to=0.75)
    with pytest.raises(ValueError):
        Thresholds(keep_recent=0)


def test_windows_and_tokenizers_are_found_by_the_models_name() -> None:
    assert window_of("gpt-4o-2024-08-06") == 128_000
    assert window_of("openai/gpt-4.1-mini") == 1_047_576
    assert window_of("claude-sonnet-4-5") == 200_000
    assert window_of("my-model", {"my-model": 32_000}) == 32_000
    assert window_of("my-model") is None
    assert counter_for("gpt-4o") == EncodingCounter("o200k_base")
    assert counter_for("gpt-4-0613") == EncodingCounter("cl100k_base")
    assert isinstance(counter_for("claude-sonnet-4-5"), HeuristicCounter)
    with pytest.raises(ValueError, match="window"):
        ContextManager("my-model")


def test_the_heuristic_counts_text_by_its_shape() -> None:
    counter = HeuristicCounter()

    assert counter.count("") == 0
    assert counter.count("hello") == 1
    assert counter.count("The build cache expires after seven days.") == EncodingCounter("o200k_base").count(
        "The build cache expires after seven days."
    )


class ChatEndpoint:
    """A local /v1/chat/completions (the third-party service a ChatSummariser calls)."""

    def __init__(self, status: int = 200, content: str = "- the summary") -> None:
        self.requests: list[tuple[dict[str, Any], str | None]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.requests.append((body, self.headers.get("Authorization")))
                answer = {"choices": [{"message": {"role": "assistant", "content": content}}]}
                raw = json.dumps(answer).encode() if status == 200 else b'{"error": "boom"}'
                self.send_response(status)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint() -> Iterator[ChatEndpoint]:
    served = ChatEndpoint(content="- We chose Redis streams.\n- Tests pass.")
    yield served
    served.stop()


def test_a_models_summary_replaces_the_folded_turns(
    endpoint: ChatEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUMMARY_TEST_KEY", "sk-test-key")
    summariser = ChatSummariser(endpoint.base_url, "small-model", api_key_env="SUMMARY_TEST_KEY")
    context = manager(window=1000, summariser=summariser)
    for n in range(40):
        context.add(user(f"Turn {n}: " + "word " * 15))

    body, authorization = endpoint.requests[0]
    assert context.summary == "- We chose Redis streams.\n- Tests pass."
    assert body["model"] == "small-model" and "user: Turn 0: word" in body["messages"][1]["content"]
    assert authorization == "Bearer sk-test-key"


def test_the_rules_summarise_when_the_model_cannot() -> None:
    failing = ChatEndpoint(status=500)
    try:
        summary = ChatSummariser(failing.base_url, "small-model").summarise(
            [user("We moved the queue to Redis.")], previous="", max_tokens=50, counter=HeuristicCounter()
        )
    finally:
        failing.stop()

    assert summary == RuleSummariser().summarise(
        [user("We moved the queue to Redis.")], previous="", max_tokens=50, counter=HeuristicCounter()
    )
    assert summary == "- user: We moved the queue to Redis."
