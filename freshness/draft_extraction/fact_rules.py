"""Proposed facts, offline: a few precise patterns over a PreparedTranscript, each
answering `(entity, key) -> value` (docs/freshness.md, "Fact drafts").

- "we use Paddle for payments" → `payments/provider = Paddle`
- "we switched (our CI) from Jenkins to GitHub Actions (for CI)" → `ci/provider = GitHub Actions`;
  "we moved the static assets from S3 to Cloudflare R2 in March" → `static-assets/provider = Cloudflare R2`
- "Project Alpha's database is Postgres 16" → `project-alpha/database = Postgres 16`
- "our database is Postgres 16" → `team/database = Postgres 16`;
  "our payments provider is Paddle" → `payments/provider = Paddle` (the last word is the key)

Precise rather than broad: a false fact draft wastes a reviewer's time. So a value is a
name (each word starting with a capital or a digit: `Paddle`, `GitHub Actions`,
`Postgres 16`) or `backticked`; never a plain word ("our database is slow" proposes
nothing). A question, a hypothetical ("if we use…", "maybe", "should we") or a vague
subject ("our problem is…") proposes nothing either. Every pattern is RE2 and runs once
over the whole text, so the whole is linear in it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from freshness.draft_extraction.transcript import (
    MAX_FACT_CANDIDATES,
    MAX_FACT_VALUE_CHARS,
    FactCandidate,
    PreparedTranscript,
    compile_pattern,
    prepare_transcript,
)
from teams.validators import is_key

# A value: `backticked`, or one to four words each starting with a capital or a digit
# (dots only inside a word: `Node.js`, `3.11`, never a sentence's full stop).
_WORD = r"[A-Z0-9](?:[A-Za-z0-9_+#-]|\.[A-Za-z0-9])*"
_VALUE = rf"(?P<value>`[^`\n\[\]]{{1,{MAX_FACT_VALUE_CHARS}}}`|{_WORD}(?:[ \t]+{_WORD}){{0,3}})"
# A subject: one to three words.
_NOUN = r"[A-Za-z][A-Za-z0-9-]*"
_SUBJECT = rf"{_NOUN}(?:[ \t]+{_NOUN}){{0,2}}"
# What may follow a value: the end of its sentence or clause.
_END = r"(?:[ \t]*(?:[.,;!:)]|\n|$))"
_APOSTROPHE = "['\u2019]"
# A time phrase after a switch ("… to Cloudflare R2 in March", "… since 2023").
_WHEN = r"(?:[ \t]+(?:in|on|last|this|since|yesterday|today)\b[^.,;!?\n]{0,30}?)?"

_USE = compile_pattern(
    r"(?m)\b[Ww]e(?:[ \t]+(?:now|currently|still|mostly))?[ \t]+(?:use|are[ \t]+using|'re[ \t]+using)[ \t]+"
    + _VALUE
    + rf"[ \t]+for[ \t]+(?:our[ \t]+|the[ \t]+|all[ \t]+(?:our[ \t]+)?)?(?P<subject>{_SUBJECT})"
    + _END
)
_SWITCH = compile_pattern(
    r"(?m)\b(?:switched|moved|migrated)[ \t]+(?:(?:our|the)[ \t]+(?P<own>"
    + _SUBJECT
    + r")[ \t]+)?from[ \t]+[A-Za-z0-9`][^.,;!?\n]{0,60}?[ \t]+to[ \t]+"
    + _VALUE
    + rf"(?:[ \t]+for[ \t]+(?:our[ \t]+|the[ \t]+)?(?P<subject>{_SUBJECT}))?"
    + _WHEN
    + _END
)
_POSSESSIVE = compile_pattern(
    r"(?m)(?:^|[ \t(\"])"
    r"(?P<entity>[A-Z][A-Za-z0-9-]*(?:[ \t]+[A-Z0-9][A-Za-z0-9-]*)?|[a-z][a-z0-9]*-[a-z0-9-]+)"
    + _APOSTROPHE
    + rf"s[ \t]+(?P<subject>{_SUBJECT})[ \t]+is[ \t]+"
    + _VALUE
    + _END
)
_OUR = compile_pattern(rf"(?m)\b[Oo]ur[ \t]+(?P<subject>{_SUBJECT})[ \t]+is[ \t]+" + _VALUE + _END)
_HYPOTHETICAL = compile_pattern(
    r"(?i)\b(?:if|whether|should|could|would|shall|maybe|might|perhaps|considering|thinking|"
    r"wondering|not sure|unless|planning|plan to|want to|going to|may)\b"
)
# Subjects that name no fact ("our problem is …", "our best bet is …").
_VAGUE = frozenset(
    {
        "problem",
        "issue",
        "goal",
        "plan",
        "concern",
        "question",
        "guess",
        "idea",
        "hope",
        "worry",
        "fear",
        "priority",
        "focus",
        "point",
        "take",
        "bet",
        "best",
        "only",
        "first",
        "next",
        "last",
        "main",
        "biggest",
        "real",
        "new",
        "old",
        "current",
        "answer",
        "thing",
        "reason",
        "option",
        "choice",
        "mistake",
        "fault",
        "job",
        "task",
        "turn",
        "time",
    }
)
# Capitalised words that stand before 's without owning anything (it's = it is).
_NOT_ENTITIES = frozenset(
    [
        "it",
        "that",
        "what",
        "there",
        "here",
        "let",
        "he",
        "she",
        "who",
        "this",
        "everything",
        "nothing",
        "today",
        "yesterday",
        "tomorrow",
        "where",
        "how",
        "when",
    ]
)
_SENTENCE_LOOKBACK = 200
MAX_SLUG_CHARS = 60


def extract_fact_candidates(text: str, limit: int = MAX_FACT_CANDIDATES) -> list[FactCandidate]:
    """At most `limit` proposed facts, in text order, one per (entity, key) (the first
    one said). A plain str is prepared first."""
    prepared = str(text if isinstance(text, PreparedTranscript) else prepare_transcript(text))
    found: dict[tuple[str, str], tuple[int, FactCandidate]] = {}
    for start, candidate in _matches(prepared):
        pair = (candidate.entity, candidate.key)
        if pair not in found or start < found[pair][0]:
            found[pair] = (start, candidate)
    ordered = sorted(found.values(), key=lambda item: item[0])
    return [candidate for _, candidate in ordered[: max(0, min(limit, MAX_FACT_CANDIDATES))]]


def _matches(text: str) -> Iterator[tuple[int, FactCandidate]]:
    for match in _USE.finditer(text):
        yield from _candidate(text, match, match.group("subject"), "provider", 'we use "… for …"')
    for match in _SWITCH.finditer(text):
        own, subject = match.group("own"), match.group("subject")
        if own and subject:
            continue  # two subjects: which one is it about?
        yield from _candidate(text, match, own or subject, "provider", "switched from … to …")
    for match in _POSSESSIVE.finditer(text):
        entity = match.group("entity")
        if entity.split()[0].lower() in _NOT_ENTITIES:
            continue
        yield from _candidate(
            text, match, entity, match.group("subject"), f"{_shown(entity)}'s … is …", whole_subject=True
        )
    for match in _OUR.finditer(text):
        words = match.group("subject").split()
        entity = " ".join(words[:-1]) if len(words) > 1 else "team"
        yield from _candidate(text, match, entity, words[-1], '"our … is …"', whole_subject=True)


def _candidate(
    text: str, match: Any, entity_text: str | None, key_text: str, why: str, *, whole_subject: bool = False
) -> Iterator[tuple[int, FactCandidate]]:
    if not entity_text:
        return
    if _is_vague(key_text if whole_subject else entity_text) or _is_vague(entity_text):
        return
    if _questioned_or_hypothetical(text, match.start(), match.end()):
        return
    value = match.group("value").strip("`").strip()
    entity, key = _slug(entity_text), _slug(key_text)
    if not value or not entity or not key or len(value) > MAX_FACT_VALUE_CHARS:
        return
    yield (
        match.start(),
        FactCandidate(
            entity=entity,
            key=key,
            value=value,
            why=f"fact: {why}"[:200],
            source_span=(match.start(), match.end()),
        ),
    )


def _is_vague(words: str) -> bool:
    return any(word in _VAGUE for word in words.lower().split())


def _questioned_or_hypothetical(text: str, start: int, end: int) -> bool:
    """The sentence the match is in asks or supposes: from the last sentence end before
    it (at most _SENTENCE_LOOKBACK back) to the next one after it."""
    before = text[max(0, start - _SENTENCE_LOOKBACK) : start]
    cut = max(before.rfind("."), before.rfind("!"), before.rfind("?"), before.rfind("\n"))
    lead = before[cut + 1 :]
    after = text[end : end + _SENTENCE_LOOKBACK]
    stops = [i for i in (after.find("."), after.find("!"), after.find("\n")) if i >= 0]
    tail = after[: min(stops)] if stops else after
    if "?" in text[start:end] or "?" in tail or "?" in text[end - 1 : end + 1]:
        return True
    return _HYPOTHETICAL.search(lead + " " + text[start:end]) is not None


def _slug(words: str) -> str:
    slug = "-".join("".join(ch if ch.isalnum() else " " for ch in words.lower()).split())[:MAX_SLUG_CHARS]
    slug = slug.strip("-")
    return slug if is_key(slug) else ""


def _shown(entity: str) -> str:
    return " ".join(entity.split())[:40]
