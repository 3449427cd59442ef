"""The credential scrubber: redacts a team's vault secrets and common credential
shapes from text before it is stored, rendered or logged.

Every pattern runs on RE2 (google-re2), whose matching time is linear in the text
whatever the pattern, so no input can make the scrubber backtrack (docs/decisions.md,
"Scrubber and linear patterns"). RE2 has no lookaround and no backreferences; where a
rule needs the text around a secret, it captures that context and only the group
named `s` (or `s2`, `s3`: one per alternative) is replaced.

The rules are data (CREDENTIAL_RULES): kinds, shapes and prefixes follow gitleaks'
default rule set and detect-secrets' keyword plugin, trimmed to what we redact;
tests/teams/test_scrubber_rules.py holds a positive and a near-miss per rule.
"""

from __future__ import annotations

import html
import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import re2

REDACTED = "[REDACTED:{kind}]"
_REDACTED_PREFIX = b"[REDACTED:"

# Secrets shorter than this would redact ordinary words ("true", "1234") everywhere.
MIN_SECRET_LENGTH = 6


@dataclass(frozen=True)
class CredentialRule:
    kind: str
    pattern: str  # RE2 syntax; groups named s, s2, s3 hold the secret (else the whole match)


# The key of a `key = value` / `"key": "value"` assignment that names a secret:
# any prefix (DB_, POSTGRES_, client_, aws_) before one of these words.
_NAMING_WORDS = (
    r"password|passwd|passphrase|pwd|secret|api[_-]?key|apikey|access[_-]?token|auth[_-]?token"
    r"|refresh[_-]?token|private[_-]?key|client[_-]?secret|secret[_-]?access[_-]?key|secret[_-]?key"
)
_ASSIGNED_KEY = (
    rf"(?i)(\b[a-z0-9_.-]{{0,40}}?(?:{_NAMING_WORDS})(?:[_-]?(?:key|value|token))?[\"']?\s*[=:]\s*)"
)
# A quoted value may hold anything but its quote; a bare one runs to whitespace or a
# quote, so `,` `;` `/` inside a password are redacted with it.
_ASSIGNED_VALUE = r"(?:\"(?P<s>[^\"\n]{4,})\"|'(?P<s2>[^'\n]{4,})'|(?P<s3>[^\s\"'<>]{6,}))"

# Ordered from the most specific shape to the most generic, so that e.g. an Anthropic
# key is reported as such and not as a generic "sk-" key. Each rule runs over the text
# left by the ones before it; a context rule whose secret is already a redaction
# marker leaves it alone.
CREDENTIAL_RULES: tuple[CredentialRule, ...] = (
    # A PEM or PGP private key block: its header and base64 lines, then the END line if
    # there is one. Line by line, not "anything up to END": RE2 is linear per search,
    # but a body that may run to the end of the text would make every BEGIN scan it.
    # The second form is a key pasted with escaped newlines (JSON, .env).
    CredentialRule(
        "private_key",
        r"-----BEGIN[ A-Z0-9]{0,40} PRIVATE KEY(?: BLOCK)?-----"
        r"(?:(?:\r?\n[ \t]*(?m:[A-Za-z-]+: [^\n]*|[A-Za-z0-9+/=]*\r?$))+"
        r"|(?:(?:\\r)?\\n(?:[A-Za-z-]+: [^\\\n]*|[A-Za-z0-9+/=]+))+)?"
        r"(?:(?:\r?\n[ \t]*|(?:\\r)?\\n)-----END[ A-Z0-9]{0,40} PRIVATE KEY(?: BLOCK)?-----)?",
    ),
    CredentialRule("memoryhub_token", r"\bmh_[A-Za-z0-9_-]{20,}"),
    CredentialRule("anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
    CredentialRule("openai_key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    CredentialRule("aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    CredentialRule("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    CredentialRule("gitlab_token", r"\bgl(?:pat|dt|ptt|rt)-[A-Za-z0-9_-]{20,}"),
    CredentialRule("slack_token", r"\b(?:xox[abeoprs]|xapp)-[A-Za-z0-9-]{10,}"),
    CredentialRule(
        "slack_webhook",
        r"(https://hooks\.slack\.com/)(?P<s>(?:services|workflows|triggers)/[A-Za-z0-9/_+-]{16,})",
    ),
    CredentialRule("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}"),
    CredentialRule("google_oauth_secret", r"\bGOCSPX-[A-Za-z0-9_-]{20,}"),
    CredentialRule("stripe_key", r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    CredentialRule("stripe_webhook_secret", r"\bwhsec_[A-Za-z0-9+/=]{20,}"),
    CredentialRule("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}"),
    CredentialRule("npm_token", r"\bnpm_[A-Za-z0-9]{30,}"),
    CredentialRule("pypi_token", r"\bpypi-AgE[A-Za-z0-9_-]{50,}"),
    CredentialRule("sendgrid_key", r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{30,}"),
    CredentialRule("vault_token", r"\bhv[sbr]\.[A-Za-z0-9_-]{24,}"),
    CredentialRule("digitalocean_token", r"\bdo[por]_v1_[a-f0-9]{64}\b"),
    CredentialRule("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    CredentialRule(
        "azure_storage_key", r"(?i)(\b(?:AccountKey|SharedAccessKey)\s*=\s*)(?P<s>[A-Za-z0-9+/]{20,}={0,2})"
    ),
    CredentialRule(
        "basic_auth", r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?basic\s+)(?P<s>[A-Za-z0-9+/]{8,}={0,2})"
    ),
    CredentialRule("bearer_token", r"(?i)(\bbearer\s+)(?P<s>[A-Za-z0-9._~+/=-]{16,})"),
    # scheme://user:password@host; the password may hold `@` (the last `@` before the
    # host ends it) but not `/ ? #`, so a port or a path is never taken for one.
    CredentialRule(
        "url_password",
        r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s:/@]*:)(?P<s>[^\s/?#]+?)(@[a-z0-9.\[\]_%-]+(?:[:/?#\s\"'<>),;]|$))",
    ),
    CredentialRule("password_assignment", _ASSIGNED_KEY + _ASSIGNED_VALUE),
    # mysql -pPASSWORD (mysql's -p takes its value glued on; ssh/docker -p is a port).
    CredentialRule(
        "command_line_password",
        r"(?i)(\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mariadb)\b[^\n|;&]*?\s-p)(?P<s>[^\s\"']+)",
    ),
)

_OPTIONS = re2.Options()
_UNANCHORED = re2._Anchor.UNANCHORED  # the wrapper's own constant, for _match_spans
_OPTIONS.max_mem = 32 << 20  # room for the lazy DFA on long texts, so RE2 keeps its fast path


@dataclass(frozen=True)
class _CompiledRule:
    kind: str
    regex: Any  # re2._Regexp (the package ships no type information)
    secret_groups: tuple[int, ...]  # indices of the groups named s, s2, s3


_COMPILED_RULES = tuple(
    _CompiledRule(
        rule.kind,
        compiled := re2.compile(rule.pattern.encode(), _OPTIONS),
        tuple(compiled.groupindex[name] for name in (b"s", b"s2", b"s3") if name in compiled.groupindex),
    )
    for rule in CREDENTIAL_RULES
)


@dataclass
class ScrubResult:
    text: str
    redactions: Counter[str] = field(default_factory=Counter)

    def as_list(self) -> list[dict[str, object]]:
        return [{"kind": kind, "count": count} for kind, count in sorted(self.redactions.items())]


class SecretMatcher:
    """One compiled alternation of a team's vault secrets (and their HTML-escaped
    forms), longest first, so one pass over a text redacts them all."""

    def __init__(self, secret_values: Iterable[str]) -> None:
        forms: set[str] = set()
        for secret in secret_values:
            if len(secret) >= MIN_SECRET_LENGTH:
                forms.update((secret, html.escape(secret), html.escape(secret, quote=False)))
        ordered = sorted(forms, key=len, reverse=True)
        self.is_empty = not ordered
        alternation = "|".join(re2.escape(form) for form in ordered)
        self._regex = None if self.is_empty else re2.compile(alternation, _OPTIONS)

    def redact(self, text: str) -> tuple[str, int]:
        if self._regex is None or len(text) < MIN_SECRET_LENGTH:
            return text, 0
        # re2 builds its result with type(text)(): a str subclass (DRF's ErrorDetail in
        # an error body) must become a plain str first.
        cleaned, count = self._regex.subn(REDACTED.format(kind="vault_secret"), str(text))
        return cleaned, int(count)


def scrub(text: str, secret_values: Iterable[str] | SecretMatcher = ()) -> ScrubResult:
    """Redact the given secret values (longest first) and every credential shape."""
    counts: Counter[str] = Counter()
    if len(text) < MIN_SECRET_LENGTH:  # too short to hold a secret or any credential shape
        return ScrubResult(text=text, redactions=counts)
    matcher = secret_values if isinstance(secret_values, SecretMatcher) else SecretMatcher(secret_values)
    text, occurrences = matcher.redact(text)
    if occurrences:
        counts["vault_secret"] += occurrences
    data = original = text.encode("utf-8", "surrogatepass")
    for rule in _COMPILED_RULES:
        data = _apply(rule, data, counts)
    if data is not original:
        text = data.decode("utf-8", "surrogatepass")
    return ScrubResult(text=text, redactions=counts)


def scrub_json(value: Any, secret_values: Iterable[str] | SecretMatcher = ()) -> tuple[Any, ScrubResult]:
    """Scrub every string (keys and values) inside a JSON value; the redactions of all
    of them add up in the one ScrubResult (whose text is empty)."""
    matcher = secret_values if isinstance(secret_values, SecretMatcher) else SecretMatcher(secret_values)
    total = ScrubResult(text="")

    def walk(node: Any) -> Any:
        if isinstance(node, str):
            result = scrub(node, matcher)
            total.redactions.update(result.redactions)
            return result.text
        if isinstance(node, dict):
            return {walk(k): walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(value), total


def _apply(rule: _CompiledRule, data: bytes, counts: Counter[str]) -> bytes:
    # On UTF-8 bytes: the re2 wrapper then maps no offsets between bytes and
    # characters, which is most of the cost of a match.
    marker = REDACTED.format(kind=rule.kind).encode()
    pieces: list[bytes] = []
    end = 0
    for spans in _match_spans(rule.regex, data):
        span = _secret_span(rule, spans, data)
        if span is None:
            continue
        pieces += (data[end : span[0]], marker)
        end = span[1]
        counts[rule.kind] += 1
    if not pieces:
        return data
    pieces.append(data[end:])
    return b"".join(pieces)


_NO_MATCH = (-1, -1)


def _match_spans(regex: Any, data: bytes) -> Iterable[Sequence[tuple[int, int]]]:
    """The spans (whole match, then each group) of every match of `regex` in `data`, left
    to right, as finditer finds them. Straight from the compiled RE2 object when the
    wrapper exposes it: finditer's per-match objects cost more than the match itself
    on a text of thousands of credentials (docs/decisions.md, "Scrubber and linear
    patterns")."""
    compiled = getattr(regex, "_regexp", None)
    if compiled is None:  # another version of the wrapper: its public API
        for match in regex.finditer(data):
            yield [match.span(group) for group in range(regex.groups + 1)]
        return
    unanchored, position, stop = _UNANCHORED, 0, len(data)
    while True:
        spans = compiled.Match(unanchored, data, position, stop)
        whole = spans[0]
        if whole == _NO_MATCH:
            return
        yield spans
        # An empty match moves on by one byte, as finditer does.
        position = whole[1] if whole[1] > position else position + 1
        if position > stop:
            return


def _secret_span(
    rule: _CompiledRule, spans: Sequence[tuple[int, int]], data: bytes
) -> tuple[int, int] | None:
    if not rule.secret_groups:
        start, end = spans[0]
        return start, end
    for group in rule.secret_groups:
        start, end = spans[group]
        if start < 0:
            continue
        if data.startswith(_REDACTED_PREFIX, start):  # an earlier, more specific rule took it
            return None
        return start, end
    return None


class CredentialScrubbingFilter(logging.Filter):
    """Logging filter: no log line leaves the process with a credential in it, nor a
    traceback (an exception's message often quotes the value that failed)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True
        cleaned = scrub(message).text
        if cleaned != message:
            record.msg = cleaned
            record.args = None
        if record.exc_info and not record.exc_text:
            # Formatters reuse exc_text when it is set, so the scrubbed text is printed.
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info)).text
        elif record.exc_text:
            record.exc_text = scrub(record.exc_text).text
        if record.stack_info:
            record.stack_info = scrub(record.stack_info).text
        return True
