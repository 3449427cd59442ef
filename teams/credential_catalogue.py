"""gitleaks' default rule set, read as data, for the credential scrubber.

The file is vendored unedited in teams/vendor/gitleaks/ (MIT, its LICENSE beside it;
SOURCE says which release and how `manage.py refresh_credential_catalogue` fetched it):
no package on the registry ships it as a data file, and nothing is downloaded at run
time. gitleaks' rules are Go regexps, RE2's syntax, so each compiles as written; a rule
that does not compile, or that applies only to files of a given path (we scan texts,
not files), is dropped and counted (`catalogue().dropped`).

What a finding is follows gitleaks (detect/detect.go): a rule runs only on a text
holding one of its keywords (case-insensitive); its secret is the rule's `secretGroup`,
else the first non-empty group, else the whole match; a secret whose Shannon entropy is
at most the rule's `entropy` is no finding, nor one a global or rule allowlist allows
(a regex on the secret, the match or the line; a stopword in the secret).

One rewrite, for speed and counted in `catalogue().rewritten`: about a hundred rules open
with `[\\w.-]{0,50}?`, a lazy run before the keyword that only moves the start of the
match left and is never part of the secret. Without it RE2 starts each search at the
keyword's first character instead of carrying 50 counters through every byte. The
allowlists that read the whole match (`regexTarget = "match"`) get that run back
(`_with_lead_run`).
"""

from __future__ import annotations

import functools
import hashlib
import math
import tomllib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import re2

CATALOGUE_DIR = Path(__file__).resolve().parent / "vendor" / "gitleaks"
CATALOGUE_FILE = CATALOGUE_DIR / "gitleaks.toml"
# The rule gitleaks calls generic runs last, after every rule that names a provider.
GENERIC_RULE_ID = "generic-api-key"

_LEAD_RUN = "[\\w.-]{0,50}?"
_LEAD_RUN_BYTES = re2.compile(rb"[\w.-]{1,50}\z")
# The programs are small; the lazy DFA needs less than the scrubber's own rules.
_OPTIONS = re2.Options()
_OPTIONS.max_mem = 8 << 20
_KEYWORD_OPTIONS = re2.Options()
_KEYWORD_OPTIONS.literal = True
_KEYWORD_OPTIONS.case_sensitive = False


@dataclass(frozen=True)
class Allowlist:
    """One of gitleaks' allowlists, as it applies to a text with no file path."""

    target: str  # "secret", "match" or "line"
    regexes: tuple[str, ...]
    stopwords: tuple[str, ...]
    require_all: bool  # condition = "AND"


@dataclass(frozen=True)
class FindingFilter:
    """A rule's allowlists and the global one, merged so a finding costs at most four
    RE2 searches: the stopwords and the regexes of the lists whose condition is OR,
    one alternation per target. AND lists (rare) are checked one by one."""

    stopwords: Any  # case-insensitive literal alternation, searched in the secret
    on_secret: Any
    on_match: Any
    on_line: Any
    and_lists: tuple[tuple[Allowlist, Any, Any], ...]  # (list, its regex, its stopwords)

    @classmethod
    def of(cls, lists: list[Allowlist]) -> FindingFilter:
        either = [a for a in lists if not a.require_all]
        by_target = {
            t: [r for a in either if a.target == t for r in a.regexes] for t in ("secret", "match", "line")
        }
        return cls(
            stopwords=_literals([w for a in either for w in a.stopwords]),
            on_secret=_alternation(by_target["secret"]),
            on_match=_alternation(by_target["match"]),
            on_line=_alternation(by_target["line"]),
            and_lists=tuple(
                (a, _alternation(list(a.regexes)), _literals(list(a.stopwords)))
                for a in lists
                if a.require_all
            ),
        )

    def allows(self, data: bytes, spans: Any, secret: bytes, lead_run_removed: bool) -> bool:
        if self.stopwords is not None and self.stopwords.search(secret) is not None:
            return True
        if self.on_secret is not None and self.on_secret.search(secret) is not None:
            return True
        if (
            self.on_match is not None
            and self.on_match.search(_match(data, spans, lead_run_removed)) is not None
        ):
            return True
        if self.on_line is not None and self.on_line.search(_line(data, spans)) is not None:
            return True
        for allowlist, regex, stopwords in self.and_lists:
            target = {"secret": secret, "match": b"", "line": b""}[allowlist.target]
            if allowlist.target == "match":
                target = _match(data, spans, lead_run_removed)
            elif allowlist.target == "line":
                target = _line(data, spans)
            checks = [regex.search(target) is not None] if regex is not None else []
            checks += [stopwords.search(secret) is not None] if stopwords is not None else []
            if checks and all(checks):
                return True
        return False


def _match(data: bytes, spans: Any, lead_run_removed: bool) -> bytes:
    start, end = spans[0]
    return data[_with_lead_run(data, start) if lead_run_removed else start : end]


def _line(data: bytes, spans: Any) -> bytes:
    start, end = spans[0]
    line_end = data.find(b"\n", end)
    return data[data.rfind(b"\n", 0, start) + 1 : line_end if line_end >= 0 else len(data)]


@dataclass(frozen=True)
class CatalogueRule:
    kind: str  # gitleaks' rule id
    regex: Any  # re2._Regexp over UTF-8 bytes (without its opening \b when `exact` is set)
    exact: Any  # the rule as written when `regex` dropped its opening \b, else None
    secret_group: int  # 0: the first non-empty group (or the whole match without groups)
    entropy: float  # 0: no entropy check
    keywords: tuple[str, ...]
    allowed: FindingFilter  # its allowlists and the global one
    lead_run_removed: bool

    def secret_span(self, spans: Any) -> tuple[int, int]:
        if self.secret_group:
            start, end = spans[self.secret_group]
            return (start, end) if start >= 0 else spans[0]
        for start, end in spans[1:]:
            if end > start >= 0:
                return start, end
        start, end = spans[0]
        return start, end

    def is_allowed(
        self, data: bytes, spans: Any, secret: tuple[int, int], *, consult_allowlists: bool = True
    ) -> bool:
        """gitleaks' rule for dropping a finding: too little entropy, or an allowlist."""
        value = data[secret[0] : secret[1]]
        if self.entropy and shannon_entropy(value) <= self.entropy:
            return True
        return consult_allowlists and self.allowed.allows(data, spans, value, self.lead_run_removed)


Rule = TypeVar("Rule")


class KeywordPrefilter(Generic[Rule]):
    """Which of a list of rules may match a text: those with no keyword, and those one of
    whose keywords the text holds, found in one pass of an RE2 set (`options` say how a
    keyword matches), in the list's order. The catalogue's rules and the scrubber's own
    are each behind one."""

    def __init__(
        self, rules: Sequence[Rule], keywords_of: Callable[[Rule], Sequence[bytes]], options: Any
    ) -> None:
        self._rules = tuple(rules)
        self._without_keywords = frozenset(i for i, rule in enumerate(self._rules) if not keywords_of(rule))
        self._keywords = re2.Set.SearchSet(options)
        self._rules_of: dict[int, list[int]] = {}
        added: dict[bytes, int] = {}
        for position, rule in enumerate(self._rules):
            for keyword in keywords_of(rule):
                if keyword not in added:
                    added[keyword] = self._keywords.Add(keyword)
                self._rules_of.setdefault(added[keyword], []).append(position)
        self._keywords.Compile()

    def rules_for(self, data: bytes) -> list[Rule]:
        chosen = set(self._without_keywords)
        for keyword in self._keywords.Match(data) or ():
            chosen.update(self._rules_of[keyword])
        return [self._rules[position] for position in sorted(chosen)]


@dataclass
class Catalogue:
    version: str
    sha256: str
    rules: tuple[CatalogueRule, ...]
    prefilter: KeywordPrefilter[CatalogueRule]  # the rules' keywords, as gitleaks matches them
    total: int = 0
    dropped: dict[str, str] = field(default_factory=dict)  # rule id -> why
    rewritten: tuple[str, ...] = ()

    def rules_to_run(self, data: bytes) -> list[CatalogueRule]:
        """The rules one of whose keywords the text holds (one pass over it), in file order."""
        return self.prefilter.rules_for(data)


def shannon_entropy(value: bytes) -> float:
    """gitleaks' shannonEntropy: bits per character of the value's own distribution."""
    if not value:
        return 0.0
    size = len(value)
    log2 = math.log2
    return -sum(count / size * log2(count / size) for count in Counter(value).values())


def _with_lead_run(data: bytes, start: int) -> int:
    """Where the match would start with the removed `[\\w.-]{0,50}?` lead run: as far left
    as 50 word, dot or dash bytes go (leftmost-first takes the longest such run)."""
    window = data[max(0, start - 50) : start]
    run = _LEAD_RUN_BYTES.search(window)
    return start - (run.end() - run.start()) if run else start


def without_word_start(pattern: str) -> str | None:
    """The pattern without its opening `\\b` (after an optional `(?i)`), or None when it
    has none. RE2 skips ahead to a pattern's literal prefix (memchr) only when nothing
    precedes it, which makes such a rule about twice as fast over a text; the scrubber
    then checks the word boundary itself (teams.scrubber._word_start_spans)."""
    for lead, kept in (("\\b", ""), ("(?i)\\b", "(?i)")):
        if pattern.startswith(lead):
            return kept + pattern[len(lead) :]
    return None


def _without_lead_run(pattern: str) -> tuple[str, bool]:
    if pattern.startswith("(?i)" + _LEAD_RUN):
        return "(?i)" + pattern[len("(?i)" + _LEAD_RUN) :], True
    if pattern.startswith(_LEAD_RUN + "(?i:" + _LEAD_RUN):
        return "(?i:" + pattern[len(_LEAD_RUN + "(?i:" + _LEAD_RUN) :], True
    if pattern.startswith(_LEAD_RUN):
        return pattern[len(_LEAD_RUN) :], True
    return pattern, False


def _alternation(patterns: list[str]) -> Any:
    return _compiled_alternation(tuple(patterns)) if patterns else None


def _literals(words: list[str]) -> Any:
    return _compiled_literals(tuple(words)) if words else None


@functools.cache
def _compiled_alternation(patterns: tuple[str, ...]) -> Any:
    # Shared by every rule whose filter holds the same lists (the global one is in all).
    return re2.compile("|".join(f"(?:{p})" for p in patterns).encode(), _OPTIONS)


@functools.cache
def _compiled_literals(words: tuple[str, ...]) -> Any:
    return re2.compile(("(?i)" + "|".join(re2.escape(w.lower()) for w in words)).encode(), _OPTIONS)


def _allowlist(raw: dict[str, Any]) -> Allowlist | None:
    """None for a list that needs a file path or a commit (never true of a text)."""
    require_all = str(raw.get("condition", "OR")).upper() == "AND"
    needs_path = bool(raw.get("paths") or raw.get("commits"))
    regexes, stopwords = tuple(raw.get("regexes", ())), tuple(raw.get("stopwords", ()))
    if (require_all and needs_path) or not (regexes or stopwords):
        return None
    for pattern in regexes:
        re2.compile(pattern.encode(), _OPTIONS)  # raises re2.error: the rule is dropped
    return Allowlist(
        target=str(raw.get("regexTarget", "secret")),
        regexes=regexes,
        stopwords=stopwords,
        require_all=require_all,
    )


def load_catalogue(path: Path = CATALOGUE_FILE) -> Catalogue:
    raw_bytes = path.read_bytes()
    config = tomllib.loads(raw_bytes.decode("utf-8"))
    dropped: dict[str, str] = {}
    rewritten: list[str] = []
    global_lists = [a for a in [_allowlist(config.get("allowlist", {}))] if a is not None]
    compiled: list[CatalogueRule] = []
    for raw in config.get("rules", ()):
        rule_id = str(raw["id"])
        if "regex" not in raw or raw.get("path"):
            dropped[rule_id] = "applies to files by path, not to text"
            continue
        pattern, lead_removed = _without_lead_run(str(raw["regex"]))
        fast = without_word_start(pattern)
        try:
            regex = re2.compile((fast or pattern).encode(), _OPTIONS)
            exact = re2.compile(pattern.encode(), _OPTIONS) if fast is not None else None
            allowlists = [a for a in map(_allowlist, raw.get("allowlists", ())) if a is not None]
            allowed = FindingFilter.of(global_lists + allowlists)
        except re2.error as exc:
            dropped[rule_id] = f"does not compile under RE2: {exc}"
            continue
        if lead_removed:
            rewritten.append(rule_id)
        compiled.append(
            CatalogueRule(
                kind=rule_id,
                regex=regex,
                exact=exact,
                secret_group=int(raw.get("secretGroup", 0)),
                entropy=float(raw.get("entropy", 0.0)),
                keywords=tuple(str(k).lower() for k in raw.get("keywords", ())),
                allowed=allowed,
                lead_run_removed=lead_removed,
            )
        )
    # Provider rules first, the generic one last (the scrubber runs its own context
    # rules in between).
    compiled.sort(key=lambda rule: rule.kind == GENERIC_RULE_ID)
    return Catalogue(
        version=_source_field("version"),
        sha256=hashlib.sha256(raw_bytes).hexdigest(),
        rules=tuple(compiled),
        prefilter=KeywordPrefilter(
            compiled, lambda rule: [keyword.encode() for keyword in rule.keywords], _KEYWORD_OPTIONS
        ),
        total=len(config.get("rules", ())),
        dropped=dropped,
        rewritten=tuple(rewritten),
    )


def _source_field(name: str) -> str:
    """A `name: value` line of the SOURCE file the refresh command writes."""
    for line in (CATALOGUE_DIR / "SOURCE").read_text().splitlines():
        key, _, value = line.partition(":")
        if key.strip() == name:
            return value.strip()
    return ""


def recorded_sha256() -> str:
    return _source_field("sha256")


@functools.cache
def catalogue() -> Catalogue:
    """The vendored rule set, loaded and compiled once per process on first use."""
    return load_catalogue()
