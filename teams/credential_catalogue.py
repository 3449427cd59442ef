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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    regex: Any  # one RE2 alternation of the list's regexes, or None
    stopwords: Any  # one case-insensitive RE2 literal alternation, or None
    require_all: bool  # condition = "AND"

    def allows(self, *, secret: bytes, match: bytes, line: bytes) -> bool:
        target = {"secret": secret, "match": match, "line": line}[self.target]
        checks = []
        if self.regex is not None:
            checks.append(self.regex.search(target) is not None)
        if self.stopwords is not None:
            checks.append(self.stopwords.search(secret) is not None)
        return all(checks) if self.require_all else any(checks)


@dataclass(frozen=True)
class CatalogueRule:
    kind: str  # gitleaks' rule id
    regex: Any  # re2._Regexp over UTF-8 bytes
    secret_group: int  # 0: the first non-empty group (or the whole match without groups)
    entropy: float  # 0: no entropy check
    keywords: tuple[str, ...]
    allowlists: tuple[Allowlist, ...]
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


@dataclass
class Catalogue:
    version: str
    sha256: str
    rules: tuple[CatalogueRule, ...]
    global_allowlist: Allowlist | None
    keyword_set: Any  # re2.Set of every rule's keywords, for the prefilter
    keyword_rules: dict[int, tuple[int, ...]]  # keyword index -> indices of the rules it enables
    keywordless_rules: tuple[int, ...]
    total: int = 0
    dropped: dict[str, str] = field(default_factory=dict)  # rule id -> why
    rewritten: tuple[str, ...] = ()

    def rules_to_run(self, data: bytes) -> list[CatalogueRule]:
        """The rules one of whose keywords the text holds (one pass over it), in file order."""
        indices = set(self.keywordless_rules)
        for keyword in self.keyword_set.Match(data) or ():
            indices.update(self.keyword_rules[keyword])
        return [self.rules[i] for i in sorted(indices)]

    def is_allowed(self, rule: CatalogueRule, data: bytes, spans: Any, secret: tuple[int, int]) -> bool:
        value = data[secret[0] : secret[1]]
        if rule.entropy and shannon_entropy(value) <= rule.entropy:
            return True
        lists = ((self.global_allowlist,) if self.global_allowlist else ()) + rule.allowlists
        if not lists:
            return False
        start, end = spans[0]
        if rule.lead_run_removed:
            start = _with_lead_run(data, start)
        line_start = data.rfind(b"\n", 0, start) + 1
        line_end = data.find(b"\n", end)
        line = data[line_start : line_end if line_end >= 0 else len(data)]
        return any(a.allows(secret=value, match=data[start:end], line=line) for a in lists)


def shannon_entropy(value: bytes) -> float:
    """gitleaks' shannonEntropy: bits per character of the value's own distribution."""
    if not value:
        return 0.0
    size = len(value)
    return -sum(count / size * math.log2(count / size) for count in Counter(value).values())


def _with_lead_run(data: bytes, start: int) -> int:
    """Where the match would start with the removed `[\\w.-]{0,50}?` lead run: as far left
    as 50 word, dot or dash bytes go (leftmost-first takes the longest such run)."""
    window = data[max(0, start - 50) : start]
    run = _LEAD_RUN_BYTES.search(window)
    return start - (run.end() - run.start()) if run else start


def _without_lead_run(pattern: str) -> tuple[str, bool]:
    if pattern.startswith("(?i)" + _LEAD_RUN):
        return "(?i)" + pattern[len("(?i)" + _LEAD_RUN) :], True
    if pattern.startswith(_LEAD_RUN + "(?i:" + _LEAD_RUN):
        return "(?i:" + pattern[len(_LEAD_RUN + "(?i:" + _LEAD_RUN) :], True
    if pattern.startswith(_LEAD_RUN):
        return pattern[len(_LEAD_RUN) :], True
    return pattern, False


def _alternation(patterns: list[str]) -> Any:
    return re2.compile("|".join(f"(?:{p})" for p in patterns).encode(), _OPTIONS) if patterns else None


def _literals(words: list[str]) -> Any:
    if not words:
        return None
    return re2.compile(("(?i)" + "|".join(re2.escape(w.lower()) for w in words)).encode(), _OPTIONS)


def _allowlist(raw: dict[str, Any]) -> Allowlist | None:
    """None for a list that needs a file path or a commit (never true of a text)."""
    require_all = str(raw.get("condition", "OR")).upper() == "AND"
    needs_path = bool(raw.get("paths") or raw.get("commits"))
    regexes, stopwords = list(raw.get("regexes", ())), list(raw.get("stopwords", ()))
    if (require_all and needs_path) or not (regexes or stopwords):
        return None
    return Allowlist(
        target=str(raw.get("regexTarget", "secret")),
        regex=_alternation(regexes),
        stopwords=_literals(stopwords),
        require_all=require_all,
    )


def load_catalogue(path: Path = CATALOGUE_FILE) -> Catalogue:
    raw_bytes = path.read_bytes()
    config = tomllib.loads(raw_bytes.decode("utf-8"))
    dropped: dict[str, str] = {}
    rewritten: list[str] = []
    compiled: list[CatalogueRule] = []
    for raw in config.get("rules", ()):
        rule_id = str(raw["id"])
        if "regex" not in raw or raw.get("path"):
            dropped[rule_id] = "applies to files by path, not to text"
            continue
        pattern, lead_removed = _without_lead_run(str(raw["regex"]))
        try:
            regex = re2.compile(pattern.encode(), _OPTIONS)
            allowlists = tuple(a for a in map(_allowlist, raw.get("allowlists", ())) if a is not None)
        except re2.error as exc:
            dropped[rule_id] = f"does not compile under RE2: {exc}"
            continue
        if lead_removed:
            rewritten.append(rule_id)
        compiled.append(
            CatalogueRule(
                kind=rule_id,
                regex=regex,
                secret_group=int(raw.get("secretGroup", 0)),
                entropy=float(raw.get("entropy", 0.0)),
                keywords=tuple(str(k).lower() for k in raw.get("keywords", ())),
                allowlists=allowlists,
                lead_run_removed=lead_removed,
            )
        )
    # Provider rules first, the generic one last (the scrubber runs its own context
    # rules in between).
    compiled.sort(key=lambda rule: rule.kind == GENERIC_RULE_ID)
    keyword_set = re2.Set.SearchSet(_KEYWORD_OPTIONS)
    keyword_index: dict[str, int] = {}
    keyword_rules: dict[int, list[int]] = {}
    for index, rule in enumerate(compiled):
        for keyword in rule.keywords:
            if keyword not in keyword_index:
                keyword_index[keyword] = keyword_set.Add(keyword.encode())
            keyword_rules.setdefault(keyword_index[keyword], []).append(index)
    keyword_set.Compile()
    return Catalogue(
        version=_source_field("version"),
        sha256=hashlib.sha256(raw_bytes).hexdigest(),
        rules=tuple(compiled),
        global_allowlist=_allowlist(config.get("allowlist", {})),
        keyword_set=keyword_set,
        keyword_rules={k: tuple(v) for k, v in keyword_rules.items()},
        keywordless_rules=tuple(i for i, rule in enumerate(compiled) if not rule.keywords),
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
