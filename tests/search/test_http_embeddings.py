"""The OpenAI-compatible provider against a real HTTP server on 127.0.0.1, and the profiles.

Timeouts and retry waits are a fraction of a second so the whole file runs in a few seconds.
"""

from __future__ import annotations

import hashlib
import json
import math
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from search.embeddings.base import EmbeddingUnavailable, Profile
from search.embeddings.openai_compat import OpenAICompatibleProvider
from search.embeddings.profiles import (
    ProfileConfigError,
    UnknownProfile,
    get_profile,
    provider_for,
    reset_providers,
)
from tests.worker import wait_for

API_KEY = "sk-test-0123456789abcdefSECRET"
KEY_ENV = "MEMORYHUB_TEST_EMBEDDING_KEY"
DIMENSIONS = 8


def _expected_vector(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """What the fake server answers for ``text``: deterministic, not normalised."""
    digest = hashlib.sha256(text.encode()).digest()
    return [digest[i] + 1.0 for i in range(dimensions)]


def _normalised(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


@dataclass
class FakeEmbeddingServer:
    """Speaks POST /v1/embeddings; scripted failures first, then healthy answers."""

    statuses: list[int] = field(default_factory=list)  # answered in order before healthy ones
    hang_seconds: float = 0.0
    dimensions: int = DIMENSIONS
    requests: list[dict[str, Any]] = field(default_factory=list)
    port: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def handle(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests.append({"path": path, "headers": headers, "body": body})
        if self.hang_seconds:
            time.sleep(self.hang_seconds)  # the scenario: a server slower than the client's timeout
        if path != "/v1/embeddings":
            return 404, {"error": {"message": "not found"}}
        if self.statuses:
            status = self.statuses.pop(0)
            # Like real APIs, the 401 body echoes part of what was sent.
            message = f"Incorrect API key provided: {headers.get('authorization', '')}"
            return status, {"error": {"message": message}}
        data = [
            {"object": "embedding", "index": index, "embedding": _expected_vector(text, self.dimensions)}
            for index, text in enumerate(body["input"])
        ]
        data.reverse()  # clients must order by index, not by position
        return 200, {"object": "list", "data": data, "model": body["model"]}


@pytest.fixture
def server() -> Iterator[FakeEmbeddingServer]:
    fake = FakeEmbeddingServer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            headers = {name.lower(): value for name, value in self.headers.items()}
            status, payload = fake.handle(self.path, headers, json.loads(raw))
            answer = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
            except OSError:
                pass  # the client timed out and hung up

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    fake.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield fake
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(autouse=True)
def _api_key_and_fresh_providers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(KEY_ENV, API_KEY)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    reset_providers()
    yield
    reset_providers()


def _profile(base_url: str, **overrides: Any) -> Profile:
    fields: dict[str, Any] = {
        "name": "test-http",
        "provider": "openai",
        "base_url": base_url,
        "api_key_env": KEY_ENV,
        "model": "test-embed",
        "dimensions": DIMENSIONS,
        "batch_size": 3,
        "connect_timeout": 0.5,
        "read_timeout": 0.2,
        "max_attempts": 3,
        "retry_wait": 0.01,
        "retry_wait_max": 0.02,
        "breaker_fail_max": 3,
        "breaker_reset_timeout": 60.0,
    }
    fields.update(overrides)
    return Profile(**fields)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_inputs_are_batched_in_order_with_the_bearer_key(server: FakeEmbeddingServer) -> None:
    provider = OpenAICompatibleProvider(_profile(server.base_url))
    texts = [f"memory number {i}" for i in range(7)]

    vectors = provider.embed_documents(texts)

    assert [len(r["body"]["input"]) for r in server.requests] == [3, 3, 1]  # ceil(7 / 3) calls
    assert [text for r in server.requests for text in r["body"]["input"]] == texts
    assert all(r["headers"]["authorization"] == f"Bearer {API_KEY}" for r in server.requests)
    assert all(r["body"]["model"] == "test-embed" and "dimensions" not in r["body"] for r in server.requests)
    for text, vector in zip(texts, vectors, strict=True):
        assert vector == pytest.approx(_normalised(_expected_vector(text)), abs=1e-9)
    assert provider.model == "test-embed@8"
    assert provider.embed_query("one") == pytest.approx(_normalised(_expected_vector("one")))


def test_dimensions_are_sent_when_the_profile_asks(server: FakeEmbeddingServer) -> None:
    provider = OpenAICompatibleProvider(_profile(server.base_url, send_dimensions=True, api_key_env=""))
    provider.embed_query("hello")
    assert server.requests[0]["body"]["dimensions"] == DIMENSIONS
    assert "authorization" not in server.requests[0]["headers"]  # a profile without a key sends none


def test_unauthorized_is_not_retried_and_the_key_never_appears(server: FakeEmbeddingServer) -> None:
    server.statuses = [401]
    provider = OpenAICompatibleProvider(_profile(server.base_url))

    with pytest.raises(EmbeddingUnavailable) as failure:
        provider.embed_query("hello")

    assert len(server.requests) == 1
    message = str(failure.value)
    assert "401" in message
    assert "Incorrect API key" in message  # the server's reason is kept...
    assert API_KEY not in message and "SECRET" not in message  # ...without the key it echoed
    chained: BaseException | None = failure.value
    while chained is not None:  # not in any exception a logger or error tracker could print
        assert API_KEY not in repr(chained) and API_KEY[:20] not in str(chained.args)
        chained = chained.__cause__ or chained.__context__


@pytest.mark.parametrize("status", [400, 403, 404])
def test_other_client_errors_are_not_retried(server: FakeEmbeddingServer, status: int) -> None:
    server.statuses = [status]
    with pytest.raises(EmbeddingUnavailable, match=str(status)):
        OpenAICompatibleProvider(_profile(server.base_url)).embed_query("hello")
    assert len(server.requests) == 1


def test_server_errors_and_rate_limits_are_retried_until_success(server: FakeEmbeddingServer) -> None:
    server.statuses = [500, 429]
    provider = OpenAICompatibleProvider(_profile(server.base_url))

    vector = provider.embed_query("hello")

    assert len(server.requests) == 3
    assert vector == pytest.approx(_normalised(_expected_vector("hello")))


def test_retries_stop_after_max_attempts(server: FakeEmbeddingServer) -> None:
    server.statuses = [503, 503, 503, 503]
    provider = OpenAICompatibleProvider(_profile(server.base_url, breaker_fail_max=10))

    with pytest.raises(EmbeddingUnavailable, match="503"):
        provider.embed_query("hello")
    assert len(server.requests) == 3


def test_hanging_server_times_out_then_the_open_breaker_fails_fast(server: FakeEmbeddingServer) -> None:
    server.hang_seconds = 1.0
    provider = OpenAICompatibleProvider(_profile(server.base_url))

    # Without the 0.2 s read timeout an attempt would wait the answer out and get vectors.
    with pytest.raises(EmbeddingUnavailable, match="Timeout"):
        provider.embed_query("hello")
    assert len(server.requests) == 3  # three attempts, each cut by the read timeout

    with pytest.raises(EmbeddingUnavailable, match="circuit open"):
        provider.embed_documents(["again", "and again"])
    assert len(server.requests) == 3  # the open circuit sent nothing, so waited for nothing


def test_breaker_lets_a_trial_call_through_after_the_reset_timeout(server: FakeEmbeddingServer) -> None:
    server.statuses = [500, 500, 500]
    provider = OpenAICompatibleProvider(_profile(server.base_url, breaker_reset_timeout=0.2))
    with pytest.raises(EmbeddingUnavailable):
        provider.embed_query("hello")
    with pytest.raises(EmbeddingUnavailable, match="circuit open"):
        provider.embed_query("hello")
    assert len(server.requests) == 3
    answers: list[list[float]] = []

    def trial_call_answered() -> bool:
        try:
            answers.append(provider.embed_query("hello"))
        except EmbeddingUnavailable as error:
            assert "circuit open" in str(error)
            return False
        return True

    wait_for(trial_call_answered, 10, "the breaker to let a trial call through")

    assert answers == [pytest.approx(_normalised(_expected_vector("hello")))]
    assert len(server.requests) == 4  # the calls refused while it was open sent nothing


def test_vectors_of_the_wrong_dimension_are_refused(server: FakeEmbeddingServer) -> None:
    server.dimensions = 5
    provider = OpenAICompatibleProvider(_profile(server.base_url))

    with pytest.raises(EmbeddingUnavailable, match="5 dimensions, the profile says 8"):
        provider.embed_query("hello")
    assert len(server.requests) == 1


def test_connection_refused_is_unavailable() -> None:
    provider = OpenAICompatibleProvider(_profile(f"http://127.0.0.1:{_free_port()}/v1"))

    with pytest.raises(EmbeddingUnavailable, match="ConnectError"):
        provider.embed_query("hello")


def test_missing_api_key_variable_is_unavailable_and_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(EmbeddingUnavailable, match=KEY_ENV):
        OpenAICompatibleProvider(_profile("http://127.0.0.1:9/v1"))


# Profiles


def test_builtin_profiles(monkeypatch: pytest.MonkeyPatch) -> None:
    assert provider_for("none") is None
    with pytest.raises(EmbeddingUnavailable, match="anthropic has no embeddings endpoint"):
        provider_for("anthropic")
    with pytest.raises(EmbeddingUnavailable, match="OPENAI_API_KEY"):
        provider_for("openai")

    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    openai = provider_for("openai")
    assert isinstance(openai, OpenAICompatibleProvider)
    assert (openai.model, openai.dimensions) == ("text-embedding-3-small@1536", 1536)
    assert get_profile("openai").base_url == "http://127.0.0.1:9/v1"
    ollama = get_profile("ollama")
    assert (ollama.base_url, ollama.model, ollama.dimensions, ollama.api_key_env) == (
        "http://127.0.0.1:11434/v1",
        "nomic-embed-text",
        768,
        "",
    )


def test_default_profile_comes_from_settings(settings: Any) -> None:
    settings.MEMORYHUB_EMBEDDING_PROFILE = "none"
    assert get_profile(None).name == "none"
    assert get_profile("").name == "none"
    assert provider_for(None) is None
    settings.MEMORYHUB_EMBEDDING_PROFILE = "anthropic"
    with pytest.raises(EmbeddingUnavailable):
        provider_for(None)


def test_unknown_profile(settings: Any) -> None:
    with pytest.raises(UnknownProfile, match="no-such-profile"):
        get_profile("no-such-profile")
    with pytest.raises(EmbeddingUnavailable, match="no-such-profile"):
        provider_for("no-such-profile")


def test_profiles_file_adds_and_overrides_profiles(
    server: FakeEmbeddingServer, settings: Any, tmp_path: Path
) -> None:
    profiles_file = tmp_path / "profiles.yaml"
    profiles_file.write_text(
        f"""
profiles:
  ollama:
    dimensions: 1024
  team-vllm:
    provider: openai
    base_url: {server.base_url}
    api_key_env: {KEY_ENV}
    model: bge-small
    dimensions: {DIMENSIONS}
    batch_size: 2
    timeout: {{connect: 0.5, read: 0.3}}
    retry_wait: 0.01
""",
        encoding="utf-8",
    )
    settings.MEMORYHUB_EMBEDDING_PROFILES_FILE = str(profiles_file)

    ollama = get_profile("ollama")
    assert (ollama.model, ollama.dimensions) == ("nomic-embed-text", 1024)  # other fields kept
    vllm = get_profile("team-vllm")
    assert (vllm.connect_timeout, vllm.read_timeout, vllm.batch_size) == (0.5, 0.3, 2)

    provider = provider_for("team-vllm")
    assert provider is not None and provider.model == "bge-small@8"
    assert len(provider.embed_documents(["a", "b", "c"])) == 3
    assert len(server.requests) == 2
    assert provider_for("team-vllm") is provider  # reused, so its breaker persists
    reset_providers()
    assert provider_for("team-vllm") is not provider


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (
            "profiles:\n  x:\n    provider: openai\n    base_url: http://h/v1\n    model: m\n    dimension: 3\n",
            "dimension",
        ),
        ("profiles:\n  x:\n    provider: cohere\n", "provider must be one of"),
        (
            "profiles:\n  x:\n    provider: openai\n    base_url: h/v1\n    model: m\n    dimensions: 3\n",
            "base_url",
        ),
        ("profiles:\n  x:\n    provider: openai\n    base_url: http://h/v1\n", "model and dimensions"),
        ("profiles:\n  x:\n    provider: local\n    model_path: /m.onnx\n", "model_sha256"),
        ("profiles:\n  local:\n    model_sha256: " + "a" * 64 + "\n", "own model id"),
        ("profiles:\n  Bad Name:\n    provider: none\n", "invalid profile name"),
        ("profiles: [1, 2]\n", "expected a mapping"),
        ("profiles:\n  x: {provider: openai\n", "not valid YAML"),
    ],
)
def test_invalid_profiles_file_is_a_clear_error(
    settings: Any, tmp_path: Path, content: str, error: str
) -> None:
    profiles_file = tmp_path / "profiles.yaml"
    profiles_file.write_text(content, encoding="utf-8")
    settings.MEMORYHUB_EMBEDDING_PROFILES_FILE = str(profiles_file)

    with pytest.raises(ProfileConfigError, match=error):
        get_profile("local")
    with pytest.raises(EmbeddingUnavailable, match=error):  # search degrades, with the reason
        provider_for("local")


def test_missing_profiles_file_is_a_clear_error(settings: Any, tmp_path: Path) -> None:
    settings.MEMORYHUB_EMBEDDING_PROFILES_FILE = str(tmp_path / "absent.yaml")
    with pytest.raises(ProfileConfigError, match="cannot read"):
        get_profile(None)
