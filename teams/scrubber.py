"""The credential scrubber: redacts a team's vault secrets and credentials from text
before it is stored, rendered or logged.

Every pattern runs on RE2 (google-re2), whose matching time is linear in the text
whatever the pattern, so no input can make the scrubber backtrack (docs/security.md,
"Linear-time patterns"). RE2 has no lookaround and no backreferences; where a rule needs
the text around a secret, it captures that context and only the group named `s` (or `s2`,
`s3`: one per alternative) is replaced.

The rules are data: gitleaks' default rule set, vendored (teams.credential_catalogue),
and ours (teams.credential_rules: the shapes the project names itself, and assignments,
prose and command lines). tests/teams/test_scrubber_rules.py holds a positive and a
near miss per rule of ours; tests/teams/test_scrubber_corpus.py holds the recall and
false-positive floors on a labelled corpus.
"""

from __future__ import annotations

import html
import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import re2

from teams.credential_catalogue import (
    GENERIC_RULE_ID,
    CatalogueRule,
    KeywordPrefilter,
    catalogue,
    without_word_start,
)
from teams.credential_rules import CONTEXT_RULES, SHAPE_RULES, CredentialRule

REDACTED = "[REDACTED:{kind}]"
_REDACTED_PREFIX = b"[REDACTED:"
_LONGEST_MARKER = 80  # "[REDACTED:" and the longest rule id
_WORD_BYTES = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
FLOOD_FINDINGS = 256  # findings of one catalogue rule in one text before its allowlists rest

# Secrets shorter than this would redact ordinary words ("true", "1234") everywhere.
MIN_SECRET_LENGTH = 6


# Ours first, gitleaks' provider rules, our context forms, gitleaks' generic rule last
# (scrub, below): from the most specific shape to the most generic, each over the text
# the previous ones left; a context rule whose secret is already a redaction marker
# leaves it alone.
CREDENTIAL_RULES: tuple[CredentialRule, ...] = SHAPE_RULES + CONTEXT_RULES

_OPTIONS = re2.Options()
_UNANCHORED = re2._Anchor.UNANCHORED  # the wrapper's own constant, for _match_spans
_OPTIONS.max_mem = 32 << 20  # room for the lazy DFA on long texts, so RE2 keeps its fast path


_SECRET_GROUP_NAMES = (b"s", b"s2", b"s3", b"s4")


@dataclass(frozen=True)
class _CompiledRule:
    kind: str
    regex: Any  # re2._Regexp (the package ships no type information), without its opening \b
    exact: Any  # the pattern as written when `regex` dropped its opening \b, else None
    secret_groups: tuple[int, ...]  # indices of the groups named s, s2, s3, s4
    quoted_groups: frozenset[int]
    check: Any  # credential_rules.ValueCheck | None
    keywords: tuple[bytes, ...]


def _compiled(rule: CredentialRule) -> _CompiledRule:
    fast = without_word_start(rule.pattern)
    regex = re2.compile((fast or rule.pattern).encode(), _OPTIONS)
    groups = {name: regex.groupindex[name] for name in _SECRET_GROUP_NAMES if name in regex.groupindex}
    return _CompiledRule(
        kind=rule.kind,
        regex=regex,
        exact=re2.compile(rule.pattern.encode(), _OPTIONS) if fast is not None else None,
        secret_groups=tuple(groups.values()),
        quoted_groups=frozenset(groups[n.encode()] for n in rule.quoted_groups if n.encode() in groups),
        check=rule.check,
        keywords=rule.keywords,
    )


# The keywords as they are, byte for byte, in the lowered text: what `keyword in lowered`
# finds, for all of them in one pass.
_KEYWORD_OPTIONS = re2.Options()
_KEYWORD_OPTIONS.literal = True
_KEYWORD_OPTIONS.encoding = re2.Options.Encoding.LATIN1


_SHAPE_RULES = tuple(map(_compiled, SHAPE_RULES))
_CONTEXT_RULES = tuple(map(_compiled, CONTEXT_RULES))
_COMPILED_RULES = _SHAPE_RULES + _CONTEXT_RULES
# One pass of an RE2 set each, where testing each rule's keywords in turn was most of a
# short text's scrub (44 of 54 µs for a 180-character entry).
_SHAPE_PREFILTER = KeywordPrefilter(_SHAPE_RULES, lambda rule: rule.keywords, _KEYWORD_OPTIONS)
_CONTEXT_PREFILTER = KeywordPrefilter(_CONTEXT_RULES, lambda rule: rule.keywords, _KEYWORD_OPTIONS)


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

    def finds(self, text: str) -> bool:
        """Whether any form of any secret occurs in the text (one pass, no copy)."""
        return self._regex is not None and self._regex.search(str(text)) is not None

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
    lowered = data.lower()  # for the keyword checks; redacting only ever removes keywords
    for rule in _SHAPE_PREFILTER.rules_for(lowered):
        data = _apply(rule, data, counts)
    rules = catalogue().rules_to_run(data)
    generic = [rule for rule in rules if rule.kind == GENERIC_RULE_ID]
    for catalogue_rule in rules:
        if catalogue_rule.kind != GENERIC_RULE_ID:
            data = _apply_catalogue_rule(catalogue_rule, data, counts)
    for rule in _CONTEXT_PREFILTER.rules_for(lowered):
        data = _apply(rule, data, counts)
    for catalogue_rule in generic:
        data = _apply_catalogue_rule(catalogue_rule, data, counts)
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
    # characters, which is most of the cost of a match. A text may be thousands of
    # matches, so the loop keeps to local names and skips the marker check when no
    # earlier rule redacted anything.
    marker = REDACTED.format(kind=rule.kind).encode()
    has_markers = _REDACTED_PREFIX in data
    groups, quoted, check = rule.secret_groups, rule.quoted_groups, rule.check
    pieces: list[bytes] = []
    end = 0
    for spans in _word_start_spans(rule.regex, rule.exact, data):
        group = next((g for g in groups if spans[g][0] >= 0), 0) if groups else 0
        start, stop = spans[group]
        if has_markers and _inside_marker(data, start, stop):  # an earlier, more specific rule took it
            continue
        if check is not None and not check(data, (start, stop), group in quoted):
            continue
        pieces += (data[end:start], marker)
        end = stop
        counts[rule.kind] += 1
    if not pieces:
        return data
    pieces.append(data[end:])
    return b"".join(pieces)


def _apply_catalogue_rule(rule: CatalogueRule, data: bytes, counts: Counter[str]) -> bytes:
    """gitleaks' rule: its secret, unless its entropy is too low or an allowlist allows
    it (teams.credential_catalogue). Past FLOOD_FINDINGS findings of the rule in one
    text, its allowlists are no longer consulted (entropy still is): a text of thousands
    of findings is a credential dump or an attack, and the allowlists' searches would
    make it cost twice what the matching does."""
    marker = REDACTED.format(kind=rule.kind).encode()
    has_markers = _REDACTED_PREFIX in data
    pieces: list[bytes] = []
    end = 0
    found = 0
    for spans in _word_start_spans(rule.regex, rule.exact, data):
        start, stop = rule.secret_span(spans)
        if stop <= start or start < end or (has_markers and _inside_marker(data, start, stop)):
            continue
        if rule.is_allowed(data, spans, (start, stop), consult_allowlists=found < FLOOD_FINDINGS):
            continue
        found += 1
        pieces += (data[end:start], marker)
        end = stop
        counts[rule.kind] += 1
    if not pieces:
        return data
    pieces.append(data[end:])
    return b"".join(pieces)


_NO_MATCH = (-1, -1)


def _match_spans(regex: Any, data: bytes, position: int = 0) -> Iterable[Sequence[tuple[int, int]]]:
    """The spans (whole match, then each group) of every match of `regex` in `data` from
    `position`, left to right, as finditer finds them. Straight from the compiled RE2
    object when the wrapper exposes it: finditer's per-match objects cost more than the
    match itself on a text of thousands of credentials (docs/security.md, "Linear-time patterns")."""
    compiled = getattr(regex, "_regexp", None)
    if compiled is None:  # another version of the wrapper: its public API
        for match in regex.finditer(data, position):
            yield [match.span(group) for group in range(regex.groups + 1)]
        return
    unanchored, stop = _UNANCHORED, len(data)
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


# How many times a text may be re-read for matches of a fast pattern that did not start
# at a word boundary, before the pattern as written takes over (_word_start_spans).
_REREAD_LIMIT = 2


def _word_start_spans(fast: Any, exact: Any, data: bytes) -> Iterable[Sequence[tuple[int, int]]]:
    """The matches of `exact`, a pattern opening with \\b, found with `fast`, the same
    pattern without it (RE2 then skips to its literal prefix). A match of `fast` that
    does not start at a word boundary is dropped and the search resumes one byte on, as
    RE2 itself would try the next position; once such retries have re-read the text
    _REREAD_LIMIT times over (`xsk-xsk-…`), `exact` finishes the text, so the whole stays
    linear."""
    if exact is None:
        yield from _match_spans(fast, data)
        return
    budget = _REREAD_LIMIT * len(data)
    position = 0
    while True:
        for spans in _match_spans(fast, data, position):
            start, end = spans[0]
            if _at_word_start(data, start):
                yield spans
                continue
            budget -= max(end - start, 1)
            position = start + 1
            break
        else:
            return
        if budget < 0:
            yield from _match_spans(exact, data, position)
            return


def _at_word_start(data: bytes, index: int) -> bool:
    """RE2's \\b at `index`: a word byte ([0-9A-Za-z_]) on one side and not the other."""
    before = index > 0 and data[index - 1] in _WORD_BYTES
    after = index < len(data) and data[index] in _WORD_BYTES
    return before != after


def _inside_marker(data: bytes, start: int, end: int) -> bool:
    """Whether [start, end) holds or lies inside a redaction marker of an earlier rule."""
    if data.find(_REDACTED_PREFIX, start, end) >= 0:
        return True
    opening = data.rfind(_REDACTED_PREFIX, max(0, start - _LONGEST_MARKER), start)
    return opening >= 0 and data.find(b"]", opening, start) < 0


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
