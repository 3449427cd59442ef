"""What replaces the oldest turns when the context manager compacts: a summary.

`RuleSummariser` (the default) needs nothing: one line a turn, the first words of what was
said and the tools called, newest lines kept when the budget is short. With an
OpenAI-compatible chat-completions endpoint configured, `ChatSummariser` asks a model;
when that endpoint fails, the rules answer instead (a summary is a read: it fails open).

Either sees only the turns being folded and the previous summary."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from memoryhub_client.context.tokens import TokenCounter, message_text

logger = logging.getLogger("memoryhub_client.context")

Message = Mapping[str, Any]
LINE_CHARS = 200


class Summariser(Protocol):
    """Turns the oldest turns (and the summary of those before them) into one text of at
    most `max_tokens` tokens as `counter` counts them."""

    def summarise(
        self, turns: Sequence[Message], *, previous: str, max_tokens: int, counter: TokenCounter
    ) -> str:
        """The summary of `turns` after `previous` (the summary so far, or "")."""


def transcript_of(turns: Sequence[Message], *, tool_results: bool = True) -> str:
    """The turns as "role: text" paragraphs (tool calls as their names)."""
    paragraphs = []
    for message in turns:
        role = str(message.get("role") or "")
        if role == "tool" and not tool_results:
            continue
        text = message_text(message) if role != "assistant" else _assistant_text(message)
        if text.strip():
            paragraphs.append(f"{role}: {text.strip()}")
    return "\n\n".join(paragraphs)


def _assistant_text(message: Message) -> str:
    content = message_text({"content": message.get("content")})
    calls = [
        str((call.get("function") or {}).get("name") or "a tool")
        for call in message.get("tool_calls") or []
        if isinstance(call, Mapping)
    ]
    return content + (f" [called {', '.join(calls)}]" if calls else "")


@dataclass(frozen=True)
class RuleSummariser:
    """One line a turn: its role and the first `line_chars` characters of its text
    (whitespace folded), tool calls named, tool results left out. The previous summary's
    lines come first; when the whole passes `max_tokens`, the oldest lines go first."""

    line_chars: int = LINE_CHARS

    def summarise(
        self, turns: Sequence[Message], *, previous: str, max_tokens: int, counter: TokenCounter
    ) -> str:
        """The previous summary's lines, then one line a turn, within `max_tokens`."""
        lines = [line for line in previous.splitlines() if line.strip()]
        for message in turns:
            role = str(message.get("role") or "")
            if role == "tool":
                continue
            text = _assistant_text(message) if role == "assistant" else message_text(message)
            flat = " ".join(text.split())
            if not flat:
                continue
            if len(flat) > self.line_chars:
                flat = flat[: self.line_chars - 1].rsplit(" ", 1)[0] + "…"
            lines.append(f"- {role}: {flat}")
        return _newest_within(lines, max_tokens, counter)


def _newest_within(lines: list[str], max_tokens: int, counter: TokenCounter) -> str:
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        cost = counter.count(line) + 1
        if used + cost > max_tokens:
            break
        kept.append(line)
        used += cost
    return "\n".join(reversed(kept))


SYSTEM_PROMPT = (
    "You compress the older part of a conversation between a user and an AI agent so that the "
    "agent can go on without it. Keep what the agent needs later: decisions and their reasons, "
    "facts learned, names, paths, numbers, commitments and open tasks. Drop greetings and "
    "repetition. Answer with the summary only, as short bullet points, at most {max_tokens} tokens."
)


@dataclass
class ChatSummariser:
    """A summary written by a model behind an OpenAI-compatible `/chat/completions`
    endpoint (`base_url` such as `https://api.openai.com/v1`, or a local server's). The key
    is read from the environment variable `api_key_env` (never stored or logged); none is
    sent when it is unset. On any failure, `fallback` (the rules) answers."""

    base_url: str
    model: str
    api_key_env: str | None = None
    timeout: float = 60.0
    fallback: Summariser = field(default_factory=RuleSummariser)
    transport: httpx.BaseTransport | None = None

    def summarise(
        self, turns: Sequence[Message], *, previous: str, max_tokens: int, counter: TokenCounter
    ) -> str:
        """The model's summary of `turns` after `previous`; the rules' when it fails."""
        text = transcript_of(turns, tool_results=False)
        if previous:
            text = f"Summary so far:\n{previous}\n\nThen:\n{text}"
        headers = {}
        key = os.environ.get(self.api_key_env, "").strip() if self.api_key_env else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        body = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT.format(max_tokens=max_tokens)},
                {"role": "user", "content": text},
            ],
            "max_tokens": max_tokens,
            "temperature": 0,
        }
        try:
            with httpx.Client(timeout=self.timeout, transport=self.transport) as http:
                response = http.post(
                    f"{self.base_url.rstrip('/')}/chat/completions", json=body, headers=headers
                )
            response.raise_for_status()
            summary = str(response.json()["choices"][0]["message"]["content"]).strip()
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
            # The endpoint's address is the operator's; the key is never part of the message.
            logger.warning("summariser failed, the rules summarised instead: %s", type(exc).__name__)
            return self.fallback.summarise(turns, previous=previous, max_tokens=max_tokens, counter=counter)
        if not summary:
            return self.fallback.summarise(turns, previous=previous, max_tokens=max_tokens, counter=counter)
        # A model may overrun the budget it was given: the newest lines are kept.
        return _newest_within(summary.splitlines(), max_tokens, counter)
