"""Embeddings from any OpenAI-compatible ``POST {base_url}/embeddings`` (OpenAI, Ollama, vLLM...).

Failure policy, because search must degrade to keyword-only rather than hang:
- each attempt has a connect and a read timeout; connect errors, timeouts, 429 and 5xx are
  retried with exponential backoff (``max_attempts`` in all); other 4xx are not, since a bad
  key or a bad request will not get better by asking again;
- every attempt passes through a circuit breaker per provider (so per profile and process):
  after ``breaker_fail_max`` transient failures in a row the circuit opens and calls fail at
  once, without touching the network, until ``breaker_reset_timeout`` has passed and one
  trial call succeeds. A dead endpoint therefore costs one request's timeouts, not one per search;
- everything surfaces as EmbeddingUnavailable, with the API key scrubbed from the message.
"""

from __future__ import annotations

import logging
import math
import os
from typing import Any

import httpx
import pybreaker
import tenacity

from search.embeddings.base import EmbeddingProvider, EmbeddingUnavailable, Profile, l2_normalised

logger = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 64
_BODY_SNIPPET_CHARS = 200


class _HTTPFailure(Exception):
    """A non-2xx answer; ``transient`` when asking again may help (429, 5xx)."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.transient = status_code == 429 or status_code >= 500


class _BadResponse(Exception):
    """A 2xx answer that does not hold the vectors asked for."""


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, _HTTPFailure):
        return exc.transient
    return isinstance(exc, httpx.TransportError)  # connect errors, timeouts, dropped connections


class _BreakerLogger(pybreaker.CircuitBreakerListener):
    def state_change(
        self,
        cb: pybreaker.CircuitBreaker,
        old_state: pybreaker.CircuitBreakerState | None,
        new_state: pybreaker.CircuitBreakerState,
    ) -> None:
        logger.warning(
            "embedding circuit %s: %s -> %s", cb.name, old_state.name if old_state else None, new_state.name
        )


class OpenAICompatibleProvider(EmbeddingProvider):
    """One profile's endpoint, with its own HTTP connection pool and circuit breaker."""

    def __init__(self, profile: Profile, *, transport: httpx.BaseTransport | None = None) -> None:
        if not profile.base_url:
            raise EmbeddingUnavailable(f"embedding profile {profile.name!r} has no base_url")
        if not profile.model or profile.dimensions <= 0:
            raise EmbeddingUnavailable(f"embedding profile {profile.name!r} needs a model and dimensions")
        self._api_key = ""
        if profile.api_key_env:
            self._api_key = os.environ.get(profile.api_key_env, "")
            if not self._api_key:
                raise EmbeddingUnavailable(
                    f"embedding profile {profile.name!r}: "
                    f"environment variable {profile.api_key_env} is not set"
                )
        self.profile = profile.name
        self.model = f"{profile.model}@{profile.dimensions}"
        self.dimensions = profile.dimensions
        self._settings = profile
        self._url = profile.base_url.rstrip("/") + "/embeddings"
        self.batch_size = profile.batch_size or DEFAULT_BATCH_SIZE
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(profile.read_timeout, connect=profile.connect_timeout),
            transport=transport,
        )
        self._breaker = pybreaker.CircuitBreaker(
            fail_max=profile.breaker_fail_max,
            reset_timeout=profile.breaker_reset_timeout,
            # Only failures of the endpoint itself count; a 400 says nothing about its health.
            exclude=[lambda exc: not _is_transient(exc)],
            listeners=[_BreakerLogger()],
            name=profile.name,
            throw_new_error_on_trip=False,
        )

    def close(self) -> None:
        self._client.close()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self._embed_batch(texts[start : start + self.batch_size]))
        return vectors

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self._settings.max_attempts),
            wait=tenacity.wait_exponential(
                multiplier=self._settings.retry_wait, max=self._settings.retry_wait_max
            ),
            retry=tenacity.retry_if_exception(_is_transient),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    return self._attempt(batch)
        except pybreaker.CircuitBreakerError:
            raise EmbeddingUnavailable(
                f"embedding profile {self.profile!r}: circuit open after repeated failures, "
                f"the endpoint is tried again {self._settings.breaker_reset_timeout:g} s after it opened"
            ) from None
        except _HTTPFailure as exc:
            raise EmbeddingUnavailable(self._scrub(f"embedding profile {self.profile!r}: {exc}")) from None
        except httpx.TimeoutException as exc:
            raise EmbeddingUnavailable(
                f"embedding profile {self.profile!r}: {type(exc).__name__} calling {self._url}"
            ) from None
        except (httpx.HTTPError, _BadResponse) as exc:
            raise EmbeddingUnavailable(
                self._scrub(f"embedding profile {self.profile!r}: {type(exc).__name__}: {exc}")
            ) from None
        raise AssertionError("unreachable: tenacity either returns or reraises")  # pragma: no cover

    def _attempt(self, batch: list[str]) -> list[list[float]]:
        # calling() holds the breaker's lock only to check and update its state, not during
        # the request, so concurrent threads are not serialised behind one slow call.
        with self._breaker.calling():
            response = self._client.post(self._url, json=self._request_body(batch))
            if response.status_code >= 400:
                # Scrubbed before cutting, so no part of a key echoed by the server survives.
                snippet = self._scrub(response.text)[:_BODY_SNIPPET_CHARS]
                raise _HTTPFailure(
                    response.status_code, f"HTTP {response.status_code} from {self._url}: {snippet}"
                )
        return self._parse(response, expected=len(batch))

    def _request_body(self, batch: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self._settings.model, "input": batch}
        if self._settings.send_dimensions:
            body["dimensions"] = self.dimensions
        return body

    def _parse(self, response: httpx.Response, *, expected: int) -> list[list[float]]:
        try:
            data = response.json()["data"]
            items = sorted(data, key=lambda item: item["index"])
            vectors = [item["embedding"] for item in items]
        except (ValueError, KeyError, TypeError) as exc:
            raise _BadResponse(f"unexpected response from {self._url}: {exc!r}") from None
        if [item["index"] for item in items] != list(range(expected)):
            raise _BadResponse(f"{self._url} returned {len(items)} embeddings for {expected} inputs")
        for vector in vectors:
            if not isinstance(vector, list) or len(vector) != self.dimensions:
                size = len(vector) if isinstance(vector, list) else type(vector).__name__
                raise _BadResponse(
                    f"{self._url} returned a vector of {size} dimensions, the profile says {self.dimensions}"
                    " (check model, dimensions and send_dimensions)"
                )
            if not all(isinstance(value, int | float) and math.isfinite(value) for value in vector):
                raise _BadResponse(f"{self._url} returned a vector with non-numeric values")
        return [l2_normalised(vector) for vector in vectors]

    def _scrub(self, message: str) -> str:
        return message.replace(self._api_key, "[redacted]") if self._api_key else message
