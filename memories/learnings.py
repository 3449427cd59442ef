"""Learnings: claims an agent learned, with how sure it is, stored as memories.

A learning lives under `learn:{topic_slug}:{claim_hash}`, so the same claim about the
same topic always lands on the same key whoever records it, and its history shows
how confidence in it changed. The memory's content is the claim; its metadata holds
`{"learning": {topic, confidence, corroborated, domains, verified}}`.

Recording a claim again:
- nothing differs → nothing is written ("unchanged");
- confidence, corroborated, verified or type differ → a hard supersede whose reason
  says what changed, e.g. "confidence high → medium" (what we believe changed);
- only the claim's wording (case, spacing), the topic's spelling or the domains
  differ → a soft supersede ("minor correction").

Locking rule: under the key's advisory lock (as every writer of a key), the active row
is read FOR NO KEY UPDATE before deciding, so a second writer of the same key waits and
then decides against the committed result. The lock is held from that read to the
save, so no writer can insert the key in between: no retry is needed.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from django.db import models, transaction

from core.errors import InvalidInput
from memories.locks import lock_active_memory
from memories.models import Memory
from memories.types import MemoryType
from memories.writes import SOFT_SUPERSEDE_REASON, SaveResult, save_memory
from teams.models import Team
from teams.scrubber import scrub
from teams.selectors import team_secret_values

KEY_PREFIX = "learn"
MAX_TOPIC_CHARS = 200
MAX_TOPIC_SLUG_CHARS = 60
MAX_CLAIM_CHARS = 4000
CLAIM_HASH_CHARS = 12
MAX_DOMAINS = 10
MAX_DOMAIN_CHARS = 40
LEARNING_TYPES = (MemoryType.LESSON.value, MemoryType.REFERENCE.value)
# Changes of these fields change what the team believes: a hard supersede.
BELIEF_FIELDS = ("confidence", "corroborated", "verified")

Outcome = Literal["created", "superseded", "unchanged"]


class Confidence(models.TextChoices):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


@dataclass
class LearningResult:
    saved: SaveResult
    outcome: Outcome


def topic_slug(topic: str) -> str:
    """Lowercase a-z, 0-9 and '-', at most 60 characters. A topic with no latin letter
    or digit (e.g. written in another script) gets `topic-` and a hash of its text."""
    ascii_text = unicodedata.normalize("NFKD", topic).encode("ascii", "ignore").decode().lower()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text).strip("-")[:MAX_TOPIC_SLUG_CHARS].rstrip("-")
    if not slug:
        normalised = " ".join(topic.split()).lower()
        slug = "topic-" + hashlib.sha256(normalised.encode()).hexdigest()[:8]
    return slug


def normalise_claim(claim: str) -> str:
    return " ".join(claim.split()).lower()


def claim_hash(claim: str) -> str:
    """First 12 hex digits of the SHA-256 of the claim, lowercased, whitespace collapsed."""
    return hashlib.sha256(normalise_claim(claim).encode()).hexdigest()[:CLAIM_HASH_CHARS]


def learning_key(topic: str, claim: str) -> str:
    return f"{KEY_PREFIX}:{topic_slug(topic)}:{claim_hash(claim)}"


def record_learning(
    *,
    team: Team,
    topic: str,
    claim: str,
    confidence: str,
    updated_by: str,
    corroborated: bool = False,
    domains: list[str] | None = None,
    verified: bool = False,
    type_name: str = MemoryType.LESSON,
) -> LearningResult:
    """Save a learning, supersede it when something changed, or leave it as it is.

    The claim, topic and domains are scrubbed of credentials first, and the key is
    derived from the scrubbed claim, so a secret never shapes a key either."""
    topic, claim = topic.strip(), claim.strip()
    if not topic:
        raise InvalidInput("topic must not be empty", field="topic")
    if len(topic) > MAX_TOPIC_CHARS:
        raise InvalidInput(f"topic is limited to {MAX_TOPIC_CHARS} characters", field="topic")
    if not claim:
        raise InvalidInput("claim must not be empty", field="claim")
    if len(claim) > MAX_CLAIM_CHARS:
        raise InvalidInput(f"claim is limited to {MAX_CLAIM_CHARS} characters", field="claim")
    if confidence not in Confidence.values:
        raise InvalidInput(f"confidence is one of: {', '.join(Confidence.values)}", field="confidence")
    if type_name not in LEARNING_TYPES:
        raise InvalidInput(f"type is one of: {', '.join(LEARNING_TYPES)}", field="type")
    domains = _normalise_domains(domains or [])

    secrets = team_secret_values(team_id=team.id)
    redactions: Counter[str] = Counter()

    def clean(text: str) -> str:
        result = scrub(text, secrets)
        redactions.update(result.redactions)
        return result.text

    claim, topic, domains = clean(claim), clean(topic), [clean(d) for d in domains]
    key = learning_key(topic, claim)
    learning = {
        "topic": topic,
        "confidence": confidence,
        "corroborated": corroborated,
        "domains": domains,
        "verified": verified,
    }

    result = _save(team, key, claim, type_name, learning, updated_by)
    if redactions:
        result.saved.redactions = _merge_redactions(result.saved.redactions, redactions)
    return result


def _save(
    team: Team, key: str, claim: str, type_name: str, learning: dict[str, Any], updated_by: str
) -> LearningResult:
    with transaction.atomic():
        # The key's advisory lock before the row lock, in the order every writer of a key
        # takes them (save_memory takes it again; advisory locks are re-entrant).
        current = lock_active_memory(team, key)
        if current is None:
            saved = save_memory(
                team=team,
                key=key,
                content=claim,
                type_name=type_name,
                metadata={"learning": learning},
                updated_by=updated_by,
                # A learning is identified by its topic and claim (its key); the same
                # claim about another topic is another learning, not a duplicate.
                allow_duplicate=True,
            )
            return LearningResult(saved=saved, outcome="created")
        reason = _supersede_reason(current, claim, type_name, learning)
        if reason is None:
            return LearningResult(saved=SaveResult(memory=current), outcome="unchanged")
        # Keep what others put in the metadata; the learning part is ours.
        metadata = {name: value for name, value in current.metadata.items() if name != "learning"}
        metadata["learning"] = learning
        saved = save_memory(
            team=team,
            key=key,
            content=claim,
            type_name=type_name,
            supersede_reason=reason,
            metadata=metadata,
            updated_by=updated_by,
        )
        return LearningResult(saved=saved, outcome="superseded")


def _supersede_reason(current: Memory, claim: str, type_name: str, learning: dict[str, Any]) -> str | None:
    """What changed, as a supersede reason; None when nothing did."""
    before = current.metadata.get("learning") if isinstance(current.metadata, dict) else None
    if not isinstance(before, dict):
        return "recorded as a learning"
    changes = [
        f"{name} {_show(before.get(name))} → {_show(learning[name])}"
        for name in BELIEF_FIELDS
        if before.get(name) != learning[name]
    ]
    if current.type != type_name:
        changes.append(f"type {current.type} → {type_name}")
    if changes:
        return "; ".join(changes)
    minor = (
        current.content != claim
        or before.get("topic") != learning["topic"]
        or before.get("domains") != learning["domains"]
    )
    return SOFT_SUPERSEDE_REASON if minor else None


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "none" if value is None else str(value)


def _normalise_domains(domains: list[str]) -> list[str]:
    """Lowercase, trimmed, deduplicated and sorted: order carries no meaning, so the
    same set never counts as a change."""
    cleaned = {" ".join(d.split()).lower() for d in domains}
    cleaned.discard("")
    if len(cleaned) > MAX_DOMAINS:
        raise InvalidInput(f"at most {MAX_DOMAINS} domains", field="domains")
    if any(len(d) > MAX_DOMAIN_CHARS for d in cleaned):
        raise InvalidInput(f"a domain is at most {MAX_DOMAIN_CHARS} characters", field="domains")
    return sorted(cleaned)


def _merge_redactions(listed: list[dict[str, object]], more: Counter[str]) -> list[dict[str, object]]:
    total: Counter[str] = Counter(more)
    for item in listed:
        total[str(item["kind"])] += int(item["count"])  # type: ignore[call-overload]
    return [{"kind": kind, "count": count} for kind, count in sorted(total.items())]
