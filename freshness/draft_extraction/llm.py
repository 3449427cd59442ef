"""Candidate memories from an OpenAI-compatible chat-completions endpoint: the
alternative to the offline rules of rules.py, chosen with MEMORYHUB_DRAFT_EXTRACTOR=openai.

What the endpoint sees: only a PreparedTranscript (bounded, scrubbed of credentials,
the team's vault secrets and PII, stripped of code), cut to its first
MEMORYHUB_DRAFT_LLM_MAX_CHARS characters, under a fixed system prompt. Nothing else of
the team (no key, no memory, no name) is sent.

What comes back is checked like the rules' candidates before anything is stored: a
JSON list of objects (or {"candidates": [...]}, or either inside a ```json fence) with
a known `type` (memories.types, aliases too), a non-empty `content` (cut to
extraction.MAX_CONTENT_CHARS at a word boundary and scrubbed again), an optional `why`
(cut), and an optional `source_span` clamped into the prepared text (else the span where
the content occurs, else [0, 0]). Keys always come from memories.keys.derive_key, never
from the model. At most extraction.MAX_CANDIDATES are kept, the first ones. An answer
that breaks any of this is refused whole (ExtractorBadAnswer, 502): no drafts.

Facts come back beside them, in the object form only ({"candidates": [...], "facts":
[...]}): each `entity` and `key` a key (letters, digits and . _ : @ -; lowercased,
spaces to `-`), a non-empty `value` of at most MAX_FACT_VALUE_CHARS (scrubbed), an
optional `why` and `source_span` as above; at most MAX_FACT_CANDIDATES, one per
(entity, key). A malformed fact refuses the answer whole, as a malformed candidate does.

Failure policy, as the embedding provider's (search/embeddings/openai_compat.py):
connect and read timeouts; connect errors, timeouts, 429 and 5xx retried with
exponential backoff (MEMORYHUB_DRAFT_LLM_MAX_ATTEMPTS in all); other 4xx not. What
still fails is ExtractorUnavailable (503), with the API key never in the message.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

import httpx
import tenacity
from django.conf import settings

from core.errors import DomainError
from freshness.draft_extraction import MAX_CANDIDATES, MAX_CONTENT_CHARS, Candidate, PreparedTranscript
from freshness.draft_extraction.transcript import MAX_FACT_CANDIDATES, MAX_FACT_VALUE_CHARS, FactCandidate
from memories.keys import derive_key
from memories.types import resolve_type
from teams.scrubber import SecretMatcher, scrub
from teams.validators import is_key

MAX_WHY_CHARS = 200
MAX_ANSWER_BYTES = 1024 * 1024
_BODY_SNIPPET_CHARS = 200

SYSTEM_PROMPT = (
    "You extract durable team memories and exact facts from a work-session transcript. Propose at "
    f"most {MAX_CANDIDATES} memories worth keeping: decisions, lessons and gotchas, always/never rules, "
    "switches from one tool to another, conventions, references (runbooks, docs) and open TODOs. "
    f"Propose at most {MAX_FACT_CANDIDATES} facts the transcript states plainly as true now, such as "
    'which provider, tool, version or region the team uses: "we use Paddle for payments" is entity '
    '"payments", key "provider", value "Paddle"; "Project Alpha\'s database is Postgres 16" is '
    'entity "project-alpha", key "database", value "Postgres 16". Never guess a fact. '
    "Skip questions, hypotheticals and small talk. Answer with JSON only: "
    '{"candidates": [objects {"type": one of "decision", "lesson", "context", "reference", "content": '
    'one or two self-contained sentences, "why": a few words on why it is worth keeping, '
    '"source_span": [start, end] character offsets of the passage in the transcript}], "facts": '
    '[objects {"entity": a short lowercase name, "key": a short lowercase name, "value": the answer, '
    '"why": a few words, "source_span": [start, end]}]}. Answer {"candidates": [], "facts": []} when '
    "nothing is worth keeping."
)


class ExtractorUnavailable(DomainError):
    """The configured extractor could not be asked (misconfigured, down, timing out)."""

    code = "extractor_unavailable"
    status = 503


class ExtractorBadAnswer(DomainError):
    """The extractor answered something that is not a valid list of candidates."""

    code = "extractor_bad_answer"
    status = 502


class _HTTPFailure(Exception):
    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.transient = status_code == 429 or status_code >= 500


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, _HTTPFailure):
        return exc.transient
    return isinstance(exc, httpx.TransportError)


def extractor_name() -> str:
    """What a draft records as its extractor: `rules`, or `openai:{model}`."""
    if settings.MEMORYHUB_DRAFT_EXTRACTOR == "openai":
        return f"openai:{settings.MEMORYHUB_DRAFT_LLM_MODEL}"[:100]
    return "rules"


class ChatExtractor:
    """One configured endpoint. Built per extraction (the settings may change in tests);
    the HTTP client is closed after the call."""

    def __init__(self, *, transport: httpx.BaseTransport | None = None) -> None:
        base_url = settings.MEMORYHUB_DRAFT_LLM_BASE_URL
        self.model = settings.MEMORYHUB_DRAFT_LLM_MODEL
        if not base_url or not self.model:
            raise ExtractorUnavailable(
                "the openai draft extractor needs MEMORYHUB_DRAFT_LLM_BASE_URL and MEMORYHUB_DRAFT_LLM_MODEL"
            )
        self._api_key = ""
        key_env = settings.MEMORYHUB_DRAFT_LLM_API_KEY_ENV
        if key_env:
            self._api_key = os.environ.get(key_env, "")
            if not self._api_key:
                raise ExtractorUnavailable(f"draft extractor: environment variable {key_env} is not set")
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._transport = transport

    def extract(
        self, text: PreparedTranscript, secrets: SecretMatcher | Iterable[str] = ()
    ) -> list[Candidate]:
        return self.extract_with_facts(text, secrets)[0]

    def extract_with_facts(
        self, text: PreparedTranscript, secrets: SecretMatcher | Iterable[str] = ()
    ) -> tuple[list[Candidate], list[FactCandidate]]:
        """The candidate memories and the proposed facts of one answer."""
        if not isinstance(text, PreparedTranscript):
            raise TypeError("an extractor reads a PreparedTranscript only")
        sent = PreparedTranscript(text[: settings.MEMORYHUB_DRAFT_LLM_MAX_CHARS])
        answer = self._ask(sent)
        return parse_answer(answer, text, secrets), parse_facts(answer, text, secrets)

    def _ask(self, text: str) -> str:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        body = {
            "model": self.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": text},
            ],
        }
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(max(1, settings.MEMORYHUB_DRAFT_LLM_MAX_ATTEMPTS)),
            wait=tenacity.wait_exponential(multiplier=settings.MEMORYHUB_DRAFT_LLM_RETRY_WAIT, max=10),
            retry=tenacity.retry_if_exception(_is_transient),
            reraise=True,
        )
        timeout = httpx.Timeout(
            settings.MEMORYHUB_DRAFT_LLM_READ_TIMEOUT, connect=settings.MEMORYHUB_DRAFT_LLM_CONNECT_TIMEOUT
        )
        try:
            with httpx.Client(headers=headers, timeout=timeout, transport=self._transport) as client:
                for attempt in retrying:
                    with attempt:
                        return self._attempt(client, body)
        except _HTTPFailure as exc:
            raise ExtractorUnavailable(self._scrub(f"draft extractor: {exc}")) from None
        except httpx.TimeoutException as exc:
            raise ExtractorUnavailable(f"draft extractor: {type(exc).__name__} calling {self._url}") from None
        except httpx.HTTPError as exc:
            raise ExtractorUnavailable(
                self._scrub(f"draft extractor: {type(exc).__name__} calling {self._url}: {exc}")
            ) from None
        raise AssertionError("unreachable: tenacity either returns or reraises")  # pragma: no cover

    def _attempt(self, client: httpx.Client, body: dict[str, Any]) -> str:
        response = client.post(self._url, json=body)
        if response.status_code >= 400:
            snippet = self._scrub(response.text)[:_BODY_SNIPPET_CHARS]
            raise _HTTPFailure(
                response.status_code, f"HTTP {response.status_code} from {self._url}: {snippet}"
            )
        if len(response.content) > MAX_ANSWER_BYTES:
            raise ExtractorBadAnswer(f"the draft extractor's answer is larger than {MAX_ANSWER_BYTES} bytes")
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise ExtractorBadAnswer(
                "the draft extractor's answer is not a chat completion (choices[0].message.content)"
            ) from None
        if not isinstance(content, str):
            raise ExtractorBadAnswer("the draft extractor's message content is not text")
        return content

    def _scrub(self, message: str) -> str:
        return message.replace(self._api_key, "[redacted]") if self._api_key else message


def parse_answer(
    answer: str, text: PreparedTranscript, secrets: SecretMatcher | Iterable[str] = ()
) -> list[Candidate]:
    """The model's message checked and bounded into candidates (module docstring)."""
    items = _json_items(answer)
    candidates: list[Candidate] = []
    seen: set[str] = set()
    for position, item in enumerate(items[: MAX_CANDIDATES * 4]):
        if len(candidates) >= MAX_CANDIDATES:
            break
        candidate = _candidate(item, position, text, secrets)
        if candidate.content.casefold() in seen:
            continue
        seen.add(candidate.content.casefold())
        candidates.append(candidate)
    return candidates


def parse_facts(
    answer: str, text: PreparedTranscript, secrets: SecretMatcher | Iterable[str] = ()
) -> list[FactCandidate]:
    """The answer's `facts`, checked and bounded (module docstring); none in the list form."""
    data = _json(answer)
    items = data.get("facts", []) if isinstance(data, dict) else []
    if not isinstance(items, list):
        raise ExtractorBadAnswer("the draft extractor's `facts` is not a list")
    facts: dict[tuple[str, str], FactCandidate] = {}
    for position, item in enumerate(items[: MAX_FACT_CANDIDATES * 4]):
        if len(facts) >= MAX_FACT_CANDIDATES:
            break
        fact = _fact(item, position, text, secrets)
        facts.setdefault((fact.entity, fact.key), fact)
    return list(facts.values())


def _fact(
    item: Any, position: int, text: PreparedTranscript, secrets: SecretMatcher | Iterable[str]
) -> FactCandidate:
    where = f"fact {position}"
    if not isinstance(item, dict):
        raise ExtractorBadAnswer(f"the draft extractor's {where} is not an object")
    names = {}
    for field_name in ("entity", "key"):
        raw = item.get(field_name)
        name = "-".join(raw.lower().split()) if isinstance(raw, str) else ""
        if not is_key(name) or scrub(name).redactions:
            raise ExtractorBadAnswer(f"the draft extractor's {where} has no valid {field_name}")
        names[field_name] = name
    raw_value = item.get("value")
    if not isinstance(raw_value, str) or not raw_value.strip() or "\x00" in raw_value:
        raise ExtractorBadAnswer(f"the draft extractor's {where} has no value")
    flat = " ".join(raw_value.split())
    value = scrub(_bounded(flat, MAX_FACT_VALUE_CHARS), secrets).text
    why = item.get("why", "")
    if not isinstance(why, str):
        raise ExtractorBadAnswer(f"the draft extractor's {where} has a `why` that is not text")
    why = scrub(_bounded(" ".join(why.replace("\x00", "").split()), MAX_WHY_CHARS), secrets).text
    return FactCandidate(
        entity=names["entity"],
        key=names["key"],
        value=value,
        why=why or "proposed by the language model",
        source_span=_span(item.get("source_span"), flat, text),
    )


def _json(answer: str) -> Any:
    body = answer.strip()
    if body.startswith("```"):
        body = body.strip("`").strip()
        if body[:4].lower() == "json":
            body = body[4:]
    try:
        return json.loads(body)
    except ValueError:
        raise ExtractorBadAnswer("the draft extractor did not answer JSON") from None


def _json_items(answer: str) -> list[Any]:
    data = _json(answer)
    if isinstance(data, dict) and isinstance(data.get("candidates"), list):
        data = data["candidates"]
    if not isinstance(data, list):
        raise ExtractorBadAnswer("the draft extractor's answer is not a list of candidates")
    return data


def _candidate(
    item: Any, position: int, text: PreparedTranscript, secrets: SecretMatcher | Iterable[str]
) -> Candidate:
    where = f"candidate {position}"
    if not isinstance(item, dict):
        raise ExtractorBadAnswer(f"the draft extractor's {where} is not an object")
    type_name = item.get("type")
    memory_type = resolve_type(type_name) if isinstance(type_name, str) and type_name.strip() else None
    if memory_type is None:
        raise ExtractorBadAnswer(f"the draft extractor's {where} has no known type")
    raw = item.get("content")
    if not isinstance(raw, str) or not raw.strip() or "\x00" in raw:
        raise ExtractorBadAnswer(f"the draft extractor's {where} has no content")
    content = scrub(_bounded(" ".join(raw.split()), MAX_CONTENT_CHARS), secrets).text
    why = item.get("why", "")
    if not isinstance(why, str):
        raise ExtractorBadAnswer(f"the draft extractor's {where} has a `why` that is not text")
    why = scrub(_bounded(" ".join(why.replace("\x00", "").split()), MAX_WHY_CHARS), secrets).text
    return Candidate(
        type=memory_type,
        key=derive_key(content),
        content=content,
        why=why or "proposed by the language model",
        source_span=_span(item.get("source_span"), raw, text),
    )


def _bounded(value: str, limit: int) -> str:
    if len(value) <= limit:
        return value
    cut = value[:limit]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "…"


def _span(value: Any, content: str, text: str) -> tuple[int, int]:
    size = len(text)
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        start = min(max(value[0], 0), size)
        end = min(max(value[1], start), size)
        return (start, end)
    found = text.find(content[:200]) if content else -1
    if found >= 0:
        return (found, min(found + len(content), size))
    return (0, 0)
