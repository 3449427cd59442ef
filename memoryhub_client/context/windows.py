"""Common models' context windows and, where one ships offline, their tokenizer's
encoding. A model is looked up by the longest prefix of its name found here, so dated
and suffixed names (`gpt-4o-2024-08-06`, `claude-sonnet-4-5`) find their family.

The windows are the vendors' published sizes in tokens (input and output together); pass
`window=` to `ContextManager`, or `windows={prefix: tokens}`, when yours differs (a
provider that serves a model with a smaller window, a newer model)."""

from __future__ import annotations

from collections.abc import Mapping

MODEL_WINDOWS: dict[str, int] = {
    "gpt-5": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4-32k": 32_768,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude": 200_000,
    "gemini-1.5-pro": 2_097_152,
    "gemini-1.5-flash": 1_048_576,
    "gemini-2": 1_048_576,
    "llama-3.1": 131_072,
    "llama-3.2": 131_072,
    "llama-3.3": 131_072,
    "mistral-large": 131_072,
}

# The encodings of OpenAI's models (toktok ships them compiled in: no download). The
# others' tokenizers are not available offline: their tokens are estimated
# (tokens.HeuristicCounter).
MODEL_ENCODINGS: dict[str, str] = {
    "gpt-5": "o200k_base",
    "gpt-4.1": "o200k_base",
    "gpt-4o": "o200k_base",
    "o1": "o200k_base",
    "o3": "o200k_base",
    "o4-mini": "o200k_base",
    "gpt-4-turbo": "cl100k_base",
    "gpt-4": "cl100k_base",
    "gpt-3.5-turbo": "cl100k_base",
}


def _longest_prefix(model: str, table: Mapping[str, object]) -> str | None:
    name = model.strip().lower().rsplit("/", 1)[-1]  # "openai/gpt-4o" is gpt-4o
    matches = [prefix for prefix in table if name.startswith(prefix)]
    return max(matches, key=len) if matches else None


def window_of(model: str, overrides: Mapping[str, int] | None = None) -> int | None:
    """The context window of `model` in tokens (`overrides` first), or None when unknown."""
    table = {**MODEL_WINDOWS, **(overrides or {})}
    prefix = _longest_prefix(model, table)
    return table[prefix] if prefix is not None else None


def encoding_of(model: str) -> str | None:
    """The tokenizer encoding of `model`, or None when none ships offline."""
    prefix = _longest_prefix(model, MODEL_ENCODINGS)
    return MODEL_ENCODINGS[prefix] if prefix is not None else None
