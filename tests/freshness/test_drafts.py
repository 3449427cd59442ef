"""Extraction drafts' services (freshness/drafts.py) and the OpenAI-compatible extractor
(freshness/draft_extraction/llm.py) against a real local HTTP server that speaks
/v1/chat/completions: what the model is sent (only the scrubbed, code-free text), how
its answer is checked and bounded, and how a bad answer, a 500 and a timeout end (a
clear error and no drafts)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from freshness import drafts
from freshness.draft_extraction import MAX_CANDIDATES, MAX_CONTENT_CHARS
from freshness.models import Draft, DraftState
from memories.keys import derive_key
from teams.models import Team
from teams.scope import team_scope
from teams.services import set_vault_entry, shutdown_team
from tests.conftest import Agent, operator_view
from tests.linear_time import assert_linear_time

API_KEY = "sk-draft-llm-test-0123456789abcdef"
TOKEN = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
VAULT_SECRET = "vault-secret-orchid-5521"
TRANSCRIPT = f"""user: deploy with token {TOKEN} and the vault password {VAULT_SECRET} please.
assistant: Done. Write to ops@example.com if it breaks.

user: We decided to move the queue from RabbitMQ to Redis streams.

```bash
export SECRET_CODE_MARKER=1
./deploy.sh --force
```
"""


class ChatServer:
    """/v1/chat/completions answering `answer` (a message content, or a raw body with a
    status), recording every request body it received."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.content: str = "[]"
        self.status = 200
        self.raw: bytes | None = None
        self.delay = 0.0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                owner.requests.append(json.loads(self.rfile.read(length) or b"{}"))
                owner.headers.append(dict(self.headers))
                if owner.delay:
                    time.sleep(owner.delay)  # the scenario: an endpoint slower than the read timeout
                if self.path != "/v1/chat/completions":
                    return self._answer(404, b'{"error": "not found"}')
                if owner.raw is not None:
                    return self._answer(owner.status, owner.raw)
                body = {
                    "id": "c1",
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": owner.content}}],
                }
                return self._answer(owner.status, json.dumps(body).encode())

            def _answer(self, status: int, raw: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def chat(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatServer]:
    server = ChatServer()
    monkeypatch.setenv("DRAFT_LLM_TEST_KEY", API_KEY)
    settings.MEMORYHUB_DRAFT_EXTRACTOR = "openai"
    settings.MEMORYHUB_DRAFT_LLM_BASE_URL = server.base_url
    settings.MEMORYHUB_DRAFT_LLM_MODEL = "test-model"
    settings.MEMORYHUB_DRAFT_LLM_API_KEY_ENV = "DRAFT_LLM_TEST_KEY"
    settings.MEMORYHUB_DRAFT_LLM_READ_TIMEOUT = 1.0
    settings.MEMORYHUB_DRAFT_LLM_MAX_ATTEMPTS = 2
    settings.MEMORYHUB_DRAFT_LLM_RETRY_WAIT = 0.01
    yield server
    server.stop()


@pytest.fixture
def vault(member: Agent) -> None:
    with team_scope(member.team.id):
        set_vault_entry(
            team=member.team, key="deploy-password", value=VAULT_SECRET, is_secret=True, actor="t"
        )


def extract(agent: Agent, transcript: str = TRANSCRIPT) -> Any:
    return agent.client.post(
        agent.url("drafts/extract/"), {"transcript": transcript, "source_session": "s-1"}, format="json"
    )


def team_drafts(team: Team) -> list[Draft]:
    with operator_view():
        return list(Draft.objects.filter(team=team).order_by("source_start"))


def test_the_model_sees_only_the_scrubbed_code_free_text(
    member: Agent, vault: None, chat: ChatServer
) -> None:
    chat.content = json.dumps(
        [
            {
                "type": "decision",
                "content": "The queue moved from RabbitMQ to Redis streams.",
                "why": "a switch",
                "source_span": [10, 40],
            }
        ]
    )

    response = extract(member)

    assert response.status_code == 201, response.content
    (request,) = chat.requests
    sent = json.dumps(request)
    assert TOKEN not in sent and VAULT_SECRET not in sent and "ops@example.com" not in sent
    assert "SECRET_CODE_MARKER" not in sent and "deploy.sh" not in sent
    assert "RabbitMQ to Redis streams" in sent and request["model"] == "test-model"
    assert chat.headers[0]["Authorization"] == f"Bearer {API_KEY}"
    (draft,) = response.json()["drafts"]
    assert draft["extractor"] == "openai:test-model" and draft["type"] == "decision"
    assert draft["key"] == derive_key("The queue moved from RabbitMQ to Redis streams.")
    assert draft["source_span"] == [10, 40] and draft["source_session"] == "s-1"
    assert TOKEN not in json.dumps(response.json()) and VAULT_SECRET not in json.dumps(response.json())


def test_the_answer_is_checked_and_bounded(member: Agent, chat: ChatServer) -> None:
    many = [{"type": "warning", "content": f"Never deploy on day {n} of the sprint."} for n in range(40)]
    long = {"type": "lesson", "content": "word " * 400, "source_span": [-50, 10**9], "why": "w" * 999}
    leaked = {"type": "context", "content": f"Use token {TOKEN} for the deploy."}
    chat.content = "```json\n" + json.dumps({"candidates": [long, leaked, *many]}) + "\n```"

    response = extract(member, "We talked about deploys and cadence for a while.")

    assert response.status_code == 201, response.content
    made = response.json()["drafts"]
    assert len(made) == MAX_CANDIDATES
    by_type = {d["type"] for d in made}
    assert by_type == {"lesson", "context"}  # `warning` is an alias of lesson
    longest = max(made, key=lambda d: len(d["content"]))
    assert len(longest["content"]) <= MAX_CONTENT_CHARS + 1 and len(longest["why"]) <= 200
    assert longest["source_span"] == [0, len("We talked about deploys and cadence for a while.")]
    assert all(TOKEN not in d["content"] for d in made)
    assert all(d["key"] == derive_key(d["content"]) for d in made)


@pytest.mark.parametrize(
    "content",
    [
        "Sure! Here are the memories: decisions...",
        json.dumps({"memories": "none"}),
        json.dumps([{"type": "banana", "content": "We use Redis."}]),
        json.dumps([{"type": "decision", "content": ""}]),
        json.dumps([{"type": "decision", "content": 5}]),
        json.dumps(["We use Redis."]),
        json.dumps([{"type": "decision", "content": "We use Redis.", "why": ["x"]}]),
    ],
)
def test_a_malformed_answer_is_a_502_and_no_drafts(member: Agent, chat: ChatServer, content: str) -> None:
    chat.content = content
    response = extract(member)
    assert response.status_code == 502, response.content
    assert response.json()["error"] == "extractor_bad_answer"
    assert team_drafts(member.team) == []


def test_an_answer_that_is_no_chat_completion_is_a_502(member: Agent, chat: ChatServer) -> None:
    chat.raw = b'{"choices": []}'
    response = extract(member)
    assert response.status_code == 502 and response.json()["error"] == "extractor_bad_answer"
    assert team_drafts(member.team) == []


def test_a_500_is_retried_then_a_503_without_the_key(member: Agent, chat: ChatServer) -> None:
    chat.status, chat.raw = 500, f'{{"error": "boom, key {API_KEY} rejected"}}'.encode()
    response = extract(member)
    assert response.status_code == 503, response.content
    body = response.json()
    assert body["error"] == "extractor_unavailable" and "HTTP 500" in body["detail"]
    assert API_KEY not in response.content.decode()
    assert len(chat.requests) == 2  # MAX_ATTEMPTS
    assert team_drafts(member.team) == []


def test_a_401_is_not_retried(member: Agent, chat: ChatServer) -> None:
    chat.status, chat.raw = 401, b'{"error": "bad key"}'
    response = extract(member)
    assert response.status_code == 503 and len(chat.requests) == 1


def test_a_timeout_is_a_503_and_no_drafts(member: Agent, chat: ChatServer, settings: Any) -> None:
    settings.MEMORYHUB_DRAFT_LLM_READ_TIMEOUT = 0.3
    settings.MEMORYHUB_DRAFT_LLM_MAX_ATTEMPTS = 1
    chat.delay = 1.0  # without the 0.3 s read timeout the answer would come and the extraction succeed
    response = extract(member)
    assert response.status_code == 503, response.content
    assert "Timeout" in response.json()["detail"]
    assert team_drafts(member.team) == []
    assert len(chat.requests) == 1  # MAX_ATTEMPTS: not retried


def test_a_misconfigured_extractor_is_a_503(member: Agent, settings: Any) -> None:
    settings.MEMORYHUB_DRAFT_EXTRACTOR = "openai"
    settings.MEMORYHUB_DRAFT_LLM_BASE_URL = ""
    assert extract(member).status_code == 503
    settings.MEMORYHUB_DRAFT_EXTRACTOR = "oracle"
    response = extract(member)
    assert response.status_code == 503 and "oracle" in response.json()["detail"]


def test_services_list_get_and_scope_by_team(member: Agent, outsider: Agent) -> None:
    team, other = member.team, outsider.team
    with team_scope(team.id):
        made = drafts.extract_drafts(
            team=team, transcript="We decided to pin Python to 3.12 everywhere.", actor="me"
        )
        (draft,) = made
        assert drafts.get_draft(team=team, draft_id=draft.id).id == draft.id
        assert list(drafts.list_drafts(team=team)) == [draft]
        drafts.reject_draft(team=team, draft_id=str(draft.id), actor="me")
        assert list(drafts.list_drafts(team=team)) == []
        assert [d.state for d in drafts.list_drafts(team=team, state="all")] == [DraftState.REJECTED]
        with pytest.raises(drafts.DraftNotPending):
            drafts.accept_draft(team=team, draft_id=draft.id, actor="me")
        with pytest.raises(drafts.DraftNotFound):
            drafts.get_draft(team=team, draft_id="nope")
    with team_scope(other.id):
        with pytest.raises(drafts.DraftNotFound):
            drafts.get_draft(team=other, draft_id=draft.id)
        with pytest.raises(drafts.DraftNotFound):
            drafts.reject_draft(team=other, draft_id=draft.id, actor="x")
        assert list(drafts.list_drafts(team=other, state="all")) == []


def test_shutting_a_team_down_deletes_its_drafts(member: Agent, outsider: Agent) -> None:
    for agent in (member, outsider):
        with team_scope(agent.team.id):
            drafts.extract_drafts(
                team=agent.team, transcript="We decided to adopt trunk-based work.", actor="me"
            )
    shutdown_team(team=member.team, actor="test")
    with operator_view():
        assert not Draft.objects.filter(team_id=member.team.id).exists()
        assert Draft.objects.filter(team=outsider.team).count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_extractions_of_one_transcript_at_once_draft_it_once(team: Team) -> None:
    from django.db import connection

    from tests.conftest import make_agent

    agents = [make_agent(team, f"bot-{n}", ["read", "write"]) for n in range(2)]
    transcript = "\n\n".join(f"We decided to use tool {n} for the nightly builds." for n in range(6))
    barrier = threading.Barrier(2)
    answers: list[int] = []

    def run(agent: Agent) -> None:
        try:
            barrier.wait(timeout=10)
            answers.append(len(extract(agent, transcript).json()["drafts"]))
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(agent,)) for agent in agents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(answers) == [0, 6]
    assert len(team_drafts(team)) == 6


def test_a_lessons_fingerprint_ignores_what_differs_between_runs_of_one_failure() -> None:
    run = drafts.learning_fingerprint
    assert run("lesson", "`go build` failed: main.go:9:2: undefined: x (in 0.21s)") == run(
        "lesson", "`go build`  FAILED: main.go:14:7: undefined: x (in 1.3s)"
    )
    assert run("lesson", 'File "a.py", line 12, in f: KeyError') == run(
        "lesson", 'File "a.py", line 40, in f: KeyError'
    )
    assert run("lesson", "Never deploy on day 3 of the sprint.") != run(
        "lesson", "Never deploy on day 5 of the sprint."
    )
    assert run("lesson", "Astro needs Node 20.") != run("lesson", "Astro needs Node 18.")
    assert run("decision", "Ports: api at host:8080, docs at host:8081") != run(
        "decision", "Ports: api at host:8080, docs at host:9090"
    )


def test_the_fingerprints_pattern_takes_time_linear_in_the_text() -> None:
    def text(size: int) -> str:
        return ("line 1: 22s 333333 :4 " * (size // 22 + 1))[:size]

    assert_linear_time(lambda t: drafts._VARYING_NUMBERS.sub("#", t), text, 256 * 1024)


def test_the_models_facts_become_fact_drafts_and_its_secrets_are_scrubbed(
    member: Agent, vault: None, chat: ChatServer
) -> None:
    chat.content = json.dumps(
        {
            "candidates": [],
            "facts": [
                {"entity": "payments", "key": "provider", "value": "Paddle", "why": "stated"},
                {"entity": "deploy", "key": "password", "value": f"it is {VAULT_SECRET}"},
            ],
        }
    )

    response = extract(member, "We use Paddle for payments.")

    assert response.status_code == 201, response.content
    assert "facts" in chat.requests[0]["messages"][0]["content"]
    drafts = {(d["entity"], d["fact_key"]): d for d in response.json()["drafts"]}
    assert drafts[("payments", "provider")]["value"] == "Paddle"
    assert drafts[("payments", "provider")]["extractor"] == "openai:test-model"
    assert VAULT_SECRET not in json.dumps(response.json())
    assert drafts[("deploy", "password")]["kind"] == "fact"
