"""A team with every kind of record an export carries, and the comparison of exports."""

from __future__ import annotations

import json
import uuid
from typing import Any

from memories import feedback, writes
from memories.facts.services import delete_fact, set_fact
from memories.hooks import DuplicateMatch
from memories.learnings import record_learning
from memories.models import Memory
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import Agent

# Changed by the import or the moment: left out when two exports are compared (the times
# of a hand-written line are the import's). Ids are compared as the place of the version
# they name in its key's history. tests/transfer/test_round_trip.py compares them all.
VOLATILE_FIELDS = {
    "id", "created_at", "updated_at", "deleted_at", "archived_at", "exported_at", "team", "access_count",
    "last_confirmed_at",
}  # fmt: skip


def seed_rich_team(team: Team) -> None:
    """Versions and soft/hard supersedes, an unsupersede, deletions, an archived key, a
    key saved again after its deletion, votes, notes, a skill, a learning, projects and metadata."""
    with team_scope(team.id):
        save = writes.save_memory
        save(team=team, key="deploy-steps", content="Deploy with make ship.", updated_by="ann", project="web")
        feedback.annotate_memory(team=team, key="deploy-steps", note="first note", created_by="bob")
        save(
            team=team,
            key="deploy-steps",
            content="Deploy with make ship-it.",
            supersede_reason="minor correction",
            updated_by="ann",
        )
        save(
            team=team,
            key="deploy-steps",
            content="Deploy with the release pipeline, never by hand.",
            supersede_reason="pipeline replaced the script",
            metadata={"tags": ["deploy"], "owner": "ops"},
            updated_by="cat",
        )
        feedback.rate_memory(team=team, key="deploy-steps", direction="up", rated_by="x")
        feedback.rate_memory(team=team, key="deploy-steps", direction="up", rated_by="y")
        feedback.rate_memory(team=team, key="deploy-steps", direction="down", rated_by="z")
        feedback.annotate_memory(team=team, key="deploy-steps", note="still true in May", created_by="dan")
        save(team=team, key="toggle", content="Use feature flags v1.", updated_by="ann", type_name="decision")
        save(
            team=team, key="toggle", content="Use feature flags v2.", supersede_reason="v2", updated_by="ann"
        )
        writes.unsupersede_memory(team=team, key="toggle", reason="v2 broke prod", updated_by="eve")
        save(team=team, key="old-idea", content="Try a monorepo.", updated_by="ann")
        writes.delete_memory(team=team, key="old-idea", deleted_by="ann")
        save(team=team, key="old-runbook", content="Restart the box by hand on Mondays.", updated_by="ann")
        writes.archive_memory(team=team, key="old-runbook", archived_by="bob")
        save(team=team, key="reborn", content="Cache in Redis.", updated_by="ann")
        writes.delete_memory(team=team, key="reborn", deleted_by="bob")
        save(team=team, key="reborn", content="Cache in Redis, with a TTL.", updated_by="bob")
        save(
            team=team,
            key="release-skill",
            content="How to cut a release: tag, build, publish.",
            updated_by="ann",
            skill_trigger={"name": "release", "keywords": ["release"], "always_on": False},
        )
        record_learning(
            team=team,
            topic="flaky tests",
            claim="The payment tests fail when run in parallel.",
            confidence="medium",
            updated_by="agent-1",
            domains=["ci"],
        )


def export_lines(agent: Agent) -> list[dict[str, Any]]:
    response = agent.client.get(agent.url("export/"))
    assert response.status_code == 200, response.content
    assert response.streaming
    body = b"".join(response.streaming_content)
    return [json.loads(line) for line in body.decode().splitlines()]


def export_body(agent: Agent) -> bytes:
    response = agent.client.get(agent.url("export/"))
    assert response.status_code == 200
    return b"".join(response.streaming_content)


def comparable(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records without what an import may change (ids, timestamps, the team)."""
    places: dict[str, str] = {}
    position: dict[str, int] = {}
    for record in records:
        if record["record"] == "memory":
            position[record["key"]] = position.get(record["key"], 0) + 1
            places[record["id"]] = f"{record['key']}#{position[record['key']]}"
    out = []
    for record in records:
        clean = {name: value for name, value in record.items() if name not in VOLATILE_FIELDS}
        for link in ("supersedes", "restored_from", "memory"):
            if clean.get(link) is not None:
                clean[link] = places.get(clean[link], "outside the file")
        out.append(clean)
    memories = [r for r in out if r["record"] == "memory"]
    notes = sorted((r for r in out if r["record"] == "annotation"), key=lambda r: (r["memory"], r["note"]))
    others = [r for r in out if r["record"] not in ("memory", "annotation")]
    return others + memories + notes


def import_file(agent: Agent, body: bytes, **params: str) -> Any:
    query = "&".join(f"{name}={value}" for name, value in params.items())
    return agent.client.post(
        agent.url("import/") + (f"?{query}" if query else ""), data=body, content_type="application/jsonl"
    )


def seed_every_field(team: Team) -> None:
    """seed_rich_team, plus what a version carries besides its text: anchors (one replaced
    by another), confirmations with and without a note (on an active and on a superseded
    version), reads (access counts), and links across keys: a batch's near duplicate that
    superseded another key's entry, undone (that key gets its entry back, restored from
    its own version), a pin kept by a supersede, an alias type and a captured version."""
    seed_rich_team(team)
    with team_scope(team.id):
        [outcome] = writes.save_batch(
            team=team,
            entries=[
                writes.BatchEntry(
                    index=0, key="cache-policy", content="Cache in Redis, with a TTL of an hour."
                )
            ],
            updated_by="ann",
        )
        assert outcome.result is not None
        reborn = Memory.objects.get(team=team, key="reborn", is_active=True)
        match = DuplicateMatch(memory=reborn, similarity=0.97, matched_by="embedding", threshold=0.92)
        writes.settle_near_check(team=team, memory_id=outcome.result.memory.id, duplicate=match)
        writes.unsupersede_memory(
            team=team, key="cache-policy", reason="two different caches", updated_by="bob"
        )
        writes.save_memory(
            team=team,
            key="runbook-link",
            content="The runbook lives in docs/runbook.md.",
            updated_by="ann",
            type_name="reference",
            anchor={"type": "file", "value": "docs/runbook.md"},
            pinned=True,
        )
        writes.confirm_memory(team=team, key="runbook-link", confirmed_by="bob", note="still there")
        writes.save_memory(
            team=team,
            key="runbook-link",
            content="The runbook lives on the wiki.",
            supersede_reason="moved to the wiki",
            updated_by="ann",
            anchor={"type": "url", "value": "https://wiki.example.com/runbook", "expect": "Runbook"},
            inherit_pinned=True,
        )
        writes.confirm_memory(team=team, key="runbook-link", confirmed_by="bob")
        writes.confirm_memory(team=team, key="runbook-link", confirmed_by="cat", note="checked the page")
        writes.confirm_memory(team=team, key="deploy-steps", confirmed_by="dan")
        # An Open Brain type, kept as the original type, and a version captured from a session.
        writes.save_memory(
            team=team, key="standup", content="Standup moved to 9:30.", updated_by="ann", type_name="meeting"
        )
        writes.save_memory(
            team=team,
            key="flaky-login",
            content="The login test is flaky under load.",
            updated_by="ann",
            type_name="lesson",
            auto_captured=True,
        )
        active = Memory.objects.filter(team=team, is_active=True).order_by("key")
        feedback.record_access(team=team, memory_ids=[row.id for row in active[:3]])
        feedback.record_access(team=team, memory_ids=[active[0].id])
        seed_facts(team)


def seed_facts(team: Team) -> None:
    """Facts with every field: a value superseded with a reason, then given new attributes,
    a deleted one, a `high` one, scopes, domains, a session and a source draft."""
    set_fact(team=team, entity="project-alpha", key="payments.provider", value="Paddle", actor="ann",
             session="s-1", scope="project:alpha", domains=["payments"], confidence=0.7)  # fmt: skip
    set_fact(team=team, entity="project-alpha", key="payments.provider", value="Stripe", actor="bob",
             reason="switched in March")  # fmt: skip
    set_fact(team=team, entity="project-alpha", key="payments.provider", value="Stripe", actor="bob",
             domains=["billing", "payments"], confidence=0.95)  # fmt: skip
    set_fact(team=team, entity="acme", key="iban", value="DE89-3704", actor="cat", sensitivity="high",
             source_draft=uuid.UUID("00000000-0000-4000-8000-00000000000a"))  # fmt: skip
    set_fact(team=team, entity="ann", key="editor", value="vim", actor="ann", scope="project:tools")
    set_fact(team=team, entity="old", key="host", value="box-1", actor="ann")
    delete_fact(team=team, entity="old", key="host", actor="dan")
