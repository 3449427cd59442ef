"""A real HTTP server that speaks the OpenAI `/v1/embeddings` endpoint, for tests.

It stands in for a third-party embedding API (OpenAI, Ollama, vLLM...). Its vectors
come from the local model, so search results through it are meaningful; its
`behaviour` switches it between healthy, refusing the key (401) and hanging past
the client's timeout, and it can be stopped and started again on the same port to
play an outage and a recovery.
"""

from __future__ import annotations

import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from search.embeddings.local import LocalOnnxProvider

API_KEY = "sk-test-embeddings-0123456789abcdef"


def _normalised(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class EmbeddingServer:
    def __init__(self, local: LocalOnnxProvider, port: int = 0) -> None:
        self.local = local
        self.behaviour = "ok"  # ok | unauthorized | slow
        self.slow_seconds = 2.0
        self.requests: list[dict[str, Any]] = []
        self.port = port
        self._server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def inputs_embedded(self) -> int:
        return sum(len(r["input"]) for r in self.requests)

    def start(self) -> EmbeddingServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                owner.requests.append(body)
                if owner.behaviour == "slow":
                    time.sleep(owner.slow_seconds)  # the scenario: slower than the client's timeout
                if self.path != "/v1/embeddings":
                    return self._answer(404, {"error": {"message": "not found"}})
                if (
                    owner.behaviour == "unauthorized"
                    or self.headers.get("Authorization") != f"Bearer {API_KEY}"
                ):
                    return self._answer(401, {"error": {"message": "Incorrect API key provided"}})
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                vectors = owner.local.embed_documents(texts)
                if body.get("dimensions"):  # shortened vectors, as OpenAI's text-embedding-3 models do
                    vectors = [_normalised(v[: body["dimensions"]]) for v in vectors]
                data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
                return self._answer(200, {"object": "list", "data": data, "model": body.get("model")})

            def _answer(self, status: int, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): that is the point of "slow"

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
