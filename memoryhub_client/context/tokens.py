"""Counting a model's tokens offline.

For OpenAI's models, their encoding (o200k_base, cl100k_base) through toktok, whose
wheel has the vocabularies compiled in: nothing is downloaded, ever (`pip install
memoryhub[tokens]`; tiktoken itself downloads its files on first use, so it is not
used). For every other model, and when toktok is not installed, `HeuristicCounter`: an
estimate from the text's shape, whose error against the real tokenizers `make bench`
measures (docs/sdk.md, "Counting tokens").

A chat message costs its text plus what the chat format adds: 3 tokens a message, its
role, and 3 more priming the reply, as OpenAI's cookbook counts them; a tool call costs
its name and its JSON arguments."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import re2

from memoryhub_client.context.windows import encoding_of

TOKENS_PER_MESSAGE = 3
TOKENS_PRIMING_REPLY = 3


class TokenCounter(Protocol):
    """Counts the tokens of a text; `name` says with what."""

    @property
    def name(self) -> str:
        """What counts: an encoding's name, `heuristic`, `custom`."""

    def count(self, text: str) -> int:
        """The text's tokens."""


@dataclass(frozen=True)
class EncodingCounter:
    """A tokenizer encoding that ships offline (toktok: `o200k_base`, `cl100k_base`)."""

    encoding: str

    @property
    def name(self) -> str:
        """The encoding's name."""
        return self.encoding

    def count(self, text: str) -> int:
        """The text's tokens in the encoding."""
        import toktok

        # One thread: counting one message at a time, in the agent's own loop.
        counts: list[int] = toktok.batch_count([text], self.encoding, threads=1)
        return counts[0]


# The text's pieces: letter runs, digit runs, whitespace runs, other runs (punctuation,
# symbols). RE2: linear in the text whatever it holds.
_PIECES = re2.compile(r"\p{L}+|\p{N}+|\s+|[^\p{L}\p{N}\s]+")
_WIDE_SCRIPTS = 0x2E80  # CJK, kana, hangul and beyond: about a token a character or less


@dataclass(frozen=True)
class HeuristicRates:
    """Tokens per piece of text. Fitted by least squares against o200k_base and
    cl100k_base on half of `make bench`'s corpus (English prose, Python, JSON and the
    admin's translations into twelve languages) and rounded; the bench measures the
    other half."""

    ascii_word: float = 0.85
    ascii_letter: float = 0.05
    digit: float = 1.1
    symbol: float = 0.55
    line_break_run: float = 1.25
    space_run: float = 1.0
    wide_char: float = 0.75
    other_letter: float = 0.4
    other_word: float = 0.8


@dataclass(frozen=True)
class HeuristicCounter:
    """An estimate of a text's tokens from its shape, for models whose tokenizer does not
    ship offline: words, letters, digits, symbols, line breaks and runs of spaces, each at a
    rate (`HeuristicRates`). Within a few percent of BPE tokenizers on English prose, code
    and JSON; much rougher on other languages, where tokenizers differ most (the bench's
    figures, docs/sdk.md)."""

    rates: HeuristicRates = HeuristicRates()
    name: str = "heuristic"

    def count(self, text: str) -> int:
        """The estimate of the text's tokens (0 for an empty text, else at least 1)."""
        rates = self.rates
        total = 0.0
        for match in _PIECES.finditer(text):
            piece = match.group(0)
            first = piece[0]
            if first.isalpha():
                if piece.isascii():
                    total += rates.ascii_word + rates.ascii_letter * len(piece)
                else:
                    wide = sum(1 for char in piece if ord(char) >= _WIDE_SCRIPTS)
                    narrow = len(piece) - wide
                    total += rates.wide_char * wide + rates.other_letter * narrow
                    total += rates.other_word if narrow else 0.0
            elif first.isdigit():
                total += rates.digit * len(piece)
            elif first.isspace():
                if "\n" in piece or "\r" in piece:
                    total += rates.line_break_run
                elif len(piece) > 1:
                    total += rates.space_run
            else:
                total += rates.symbol * len(piece)
        return max(1, round(total)) if text else 0


@dataclass(frozen=True)
class CallableCounter:
    """Any tokenizer, as a function from text to a count (a Hugging Face tokenizer's
    `lambda text: len(tokenizer.encode(text))`, say)."""

    function: Callable[[str], int]
    name: str = "custom"

    def count(self, text: str) -> int:
        """What the function answers for the text."""
        return int(self.function(text))


def counter_for(model: str) -> TokenCounter:
    """The model's own encoding when it ships offline (and toktok is installed), else the
    heuristic."""
    encoding = encoding_of(model)
    if encoding is not None and toktok_available():
        return EncodingCounter(encoding)
    return HeuristicCounter()


def toktok_available() -> bool:
    try:
        import toktok  # noqa: F401
    except ImportError:
        return False
    return True


def message_text(message: Mapping[str, Any]) -> str:
    """The text a chat message carries: its content (a string, or the text of its parts:
    OpenAI's `text` parts, Anthropic's `text`, `tool_use` input and `tool_result`
    content) and its tool calls' names and arguments."""
    parts = [_content_text(message.get("content"))]
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            parts.append(str(function.get("name") or ""))
            arguments = function.get("arguments")
            parts.append(arguments if isinstance(arguments, str) else json.dumps(arguments or {}))
    return "\n".join(part for part in parts if part)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping):
            kind = part.get("type")
            if kind == "text":
                texts.append(str(part.get("text") or ""))
            elif kind == "tool_use":
                texts.append(f"{part.get('name') or ''}\n{json.dumps(part.get('input') or {})}")
            elif kind == "tool_result":
                texts.append(_content_text(part.get("content")))
    return "\n".join(text for text in texts if text)


def message_tokens(message: Mapping[str, Any], counter: TokenCounter) -> int:
    """What one chat message costs in the prompt."""
    name = message.get("name")
    return (
        TOKENS_PER_MESSAGE
        + counter.count(str(message.get("role") or ""))
        + counter.count(message_text(message))
        + (counter.count(str(name)) + 1 if name else 0)
    )
