"""The credential scrubber: redacts a team's vault secrets and common credential
shapes from text before it is stored, rendered or logged."""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

REDACTED = "[REDACTED:{kind}]"

# Ordered from the most specific shape to the most generic, so that e.g. an
# Anthropic key is reported as such and not as a generic "sk-" key.
CREDENTIAL_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----",
            re.S,
        ),
    ),
    ("memoryhub_token", re.compile(r"\bmh_[A-Za-z0-9_-]{20,}")),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{20,}")),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    (
        "aws_secret_key",
        re.compile(r"(?i)(aws_secret_access_key\s*[=:]\s*)[\"']?[A-Za-z0-9/+=]{40}[\"']?"),
    ),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("slack_token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("stripe_key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("bearer_token", re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{16,}")),
    ("url_password", re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s:/@]+:)[^\s@/]+(@)", re.I)),
    (
        "password_assignment",
        re.compile(
            r"(?i)(\b(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token)\b\s*[=:]\s*)"
            r"[\"']?[^\s\"',;]{6,}[\"']?"
        ),
    ),
]

# Secrets shorter than this would redact ordinary words ("true", "1234") everywhere.
MIN_SECRET_LENGTH = 6


@dataclass
class ScrubResult:
    text: str
    redactions: Counter[str] = field(default_factory=Counter)

    def as_list(self) -> list[dict[str, object]]:
        return [{"kind": kind, "count": count} for kind, count in sorted(self.redactions.items())]


def scrub(text: str, secret_values: Iterable[str] = ()) -> ScrubResult:
    """Redact the given secret values (longest first) and every credential shape."""
    counts: Counter[str] = Counter()
    if len(text) < MIN_SECRET_LENGTH:  # too short to hold a secret or any credential shape
        return ScrubResult(text=text, redactions=counts)
    for secret in _longest_first(tuple(secret_values)):
        occurrences = text.count(secret)
        if occurrences:
            counts["vault_secret"] += occurrences
            text = text.replace(secret, REDACTED.format(kind="vault_secret"))
    for kind, pattern, replacement in _PREPARED_PATTERNS:
        text, occurrences = pattern.subn(replacement, text)
        if occurrences:
            counts[kind] += occurrences
    return ScrubResult(text=text, redactions=counts)


def scrub_json(value: Any, secret_values: Iterable[str] = ()) -> tuple[Any, ScrubResult]:
    """Scrub every string (keys and values) inside a JSON value; the redactions of all
    of them add up in the one ScrubResult (whose text is empty)."""
    secrets = tuple(secret_values)
    total = ScrubResult(text="")

    def walk(node: Any) -> Any:
        if isinstance(node, str):
            result = scrub(node, secrets)
            total.redactions.update(result.redactions)
            return result.text
        if isinstance(node, dict):
            return {walk(k): walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(value), total


def _longest_first(secret_values: tuple[str, ...]) -> tuple[str, ...]:
    # Not cached on purpose: plaintext secrets must not outlive the request that read them.
    return tuple(sorted({s for s in secret_values if len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True))


def _replacement(kind: str, pattern: re.Pattern[str]) -> str:
    marker = REDACTED.format(kind=kind)
    # Patterns with groups keep their surrounding context (the "Bearer " prefix,
    # the "scheme://user:" of a URL) and replace only the secret part.
    if pattern.groups == 2:
        return rf"\g<1>{marker}\g<2>"
    if pattern.groups == 1:
        return rf"\g<1>{marker}"
    return marker.replace("\\", "\\\\")


_PREPARED_PATTERNS = [(kind, pattern, _replacement(kind, pattern)) for kind, pattern in CREDENTIAL_PATTERNS]


class CredentialScrubbingFilter(logging.Filter):
    """Logging filter: no log line leaves the process with a credential in it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True
        cleaned = scrub(message).text
        if cleaned != message:
            record.msg = cleaned
            record.args = None
        return True
