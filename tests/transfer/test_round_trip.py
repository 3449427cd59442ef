"""Export → import into an empty team reproduces the team, field by field.

Every field of `Memory` (and of the tables that hang off a version) is either compared
here or excluded with the reason it cannot or must not travel: a field added to the model
fails `test_every_field_is_compared_or_excluded_with_a_reason` until the export carries it
or this module says why not. The JSON Lines export carries every version; the markdown
export (`memoryhub export-markdown`) carries what the team believes now, its active
versions, and is compared on those.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.db import models
from django.utils.dateparse import parse_datetime

from memories.conversations.models import Conversation
from memories.conversations.services import Line, store_conversation
from memories.facts.models import Fact
from memories.models import Annotation, Confirmation, Memory
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import Agent, make_agent, operator_view
from tests.factories import TeamFactory
from tests.mcp.conftest import Server, mcp_server  # noqa: F401  (the server fixture)
from tests.transfer.helpers import export_body, import_file, seed_every_field
from tests.transfer.test_cli import memoryhub

PROVENANCE = "imported_from"

# Compared as they are.
CARRIED = {
    "key",
    "content",
    "type",
    "project",
    "is_active",
    "deleted_at",
    "archived_at",
    "supersede_reason",
    "supersede_kind",
    "content_hash",
    "created_at",
    "access_count",
    "last_accessed_at",
    "upvotes",
    "downvotes",
    "skill_trigger",
    "last_confirmed_at",
    "confirmed_by_count",
    "anchor",
    "pinned",
    "original_type",
    "auto_captured",
}
# Compared without the provenance the import adds (metadata.imported_from).
WITH_PROVENANCE = {"metadata"}
# Links to other versions: compared as the place of the version they name in its key's history.
LINKS = {"supersedes", "restored_from", "successors"}
# The importer writes every version (docs/write-path.md, "Imports are written by the
# importer"); what the file said is compared in metadata.imported_from.
ATTRIBUTED = {"updated_by", "deleted_by", "archived_by"}
# Rows that hang off a version and travel with it, compared field by field below.
RELATED = {"annotations", "confirmations"}
EXCLUDED = {
    "id": "a new primary key in the importing team (an id is unique in the database, and the "
    "source team may live on the same server); links are compared as places in the history",
    "team": "the importing team",
    "updated_at": "when this team's row last changed: the import wrote it (search's reconcile job "
    "reads it as such)",
    "index_state": "search's own bookkeeping: the importing team indexes every imported version again",
    "index_queued_at": "search's own bookkeeping (indexing is enqueued again)",
    "index_attempts": "search's own bookkeeping (indexing is enqueued again)",
    "index_next_attempt_at": "search's own bookkeeping (indexing is enqueued again)",
    "index_last_error": "search's own bookkeeping (indexing is enqueued again)",
    "near_check_pending": "a batch save's deferred duplicate check; an import saves with allow_duplicate",
    "anchor_broken_at": "freshness's flag goes with its open nudge, which is freshness's (floor 4) and "
    "not part of a memory export; the anchor job checks the anchor again",
    "contradicted_at": "freshness's flag goes with its open nudge (not exported); the contradiction "
    "pass judges the entries again once indexed",
    "chunks": "derived from the content by indexing",
    "nudges": "freshness's review queue, not the team's memory",
    "anchor_checks": "freshness's record of checks, not the team's memory",
    "drafts": "freshness's extraction drafts, not the team's memory",
    "owner": "set by the database from a personal key's @<username> in the importing team "
    "(tests/teams/test_personal_entries.py)",
}
ANNOTATION_FIELDS = {"note", "created_by", "created_at"}
CONFIRMATION_FIELDS = {"confirmed_by", "note", "confirmed_at"}
RELATED_EXCLUDED = {
    "id": "a new primary key",
    "team": "the importing team",
    "memory": "the version it hangs off",
}

# The markdown export holds the active versions and what a version is, not its history.
MARKDOWN_NOT_CARRIED = {
    "supersedes": "history: the JSON Lines export carries it",
    "supersede_reason": "history: the JSON Lines export carries it",
    "supersede_kind": "history: the JSON Lines export carries it",
    "restored_from": "history: the JSON Lines export carries it",
    "successors": "history: the JSON Lines export carries it",
    "annotations": "history: notes are in the JSON Lines export",
    "confirmations": "history: who confirmed when is in the JSON Lines export",
    "confirmed_by_count": "counts the confirmations, which only the JSON Lines export carries",
}


# Facts (docs/facts.md, "Export and import"): compared as they are.
FACT_CARRIED = {
    "entity",
    "key",
    "value",
    "scope",
    "domains",
    "sensitivity",
    "confidence",
    "is_active",
    "deleted_at",
    "supersede_reason",
    "session",
    "source_draft",
    "created_at",
}
FACT_LINKS = {"supersedes", "successors"}
# The importer writes every version; what the file said is compared in imported_from.
FACT_ATTRIBUTED = {"updated_by", "deleted_by", "imported_from"}
FACT_EXCLUDED = {
    "id": "a new primary key in the importing team; links are compared as places in the history",
    "team": "the importing team",
    "owner": "set by the database from a personal entity's @<username> in the importing team",
}


def model_fields(model: type[models.Model]) -> set[str]:
    return {field.name for field in model._meta.get_fields()}


def test_every_field_is_compared_or_excluded_with_a_reason() -> None:
    classified = CARRIED | WITH_PROVENANCE | LINKS | ATTRIBUTED | RELATED | set(EXCLUDED)
    assert model_fields(Memory) == classified
    assert len(classified) == len(CARRIED) + len(WITH_PROVENANCE) + len(LINKS) + len(ATTRIBUTED) + len(
        RELATED
    ) + len(EXCLUDED)
    assert model_fields(Annotation) == ANNOTATION_FIELDS | set(RELATED_EXCLUDED)
    assert model_fields(Confirmation) == CONFIRMATION_FIELDS | set(RELATED_EXCLUDED)
    assert set(MARKDOWN_NOT_CARRIED) <= model_fields(Memory)
    assert model_fields(Fact) == FACT_CARRIED | FACT_LINKS | FACT_ATTRIBUTED | set(FACT_EXCLUDED)


def fact_versions(team: Team) -> list[Fact]:
    with operator_view():
        return list(
            Fact.objects.filter(team=team)
            .prefetch_related("successors")
            .order_by("entity", "key", "created_at")
        )


def fact_differences(source: list[Fact], copy: list[Fact], *, importer: str, team: str) -> list[str]:
    """Field by field, links as places, and every version the importer's with the file's
    author and time in imported_from."""
    places = [
        {row.id: f"{row.entity}/{row.key}#{n}" for n, row in enumerate(rows)} for rows in (source, copy)
    ]
    found = []
    for mine, theirs in zip(source, copy, strict=True):
        where = f"{mine.entity}/{mine.key} ({mine.created_at.isoformat()})"
        for name in sorted(FACT_CARRIED):
            if getattr(mine, name) != getattr(theirs, name):
                found.append(f"{where}: {name}: {getattr(mine, name)!r} != {getattr(theirs, name)!r}")
        if places[0].get(mine.supersedes_id) != places[1].get(theirs.supersedes_id):
            found.append(f"{where}: supersedes")
        if sorted(places[0][r.id] for r in mine.successors.all()) != sorted(
            places[1][r.id] for r in theirs.successors.all()
        ):
            found.append(f"{where}: successors")
        if theirs.updated_by != importer or theirs.deleted_by != (importer if mine.deleted_by else ""):
            found.append(f"{where}: not the importer's: {theirs.updated_by!r}, {theirs.deleted_by!r}")
        said = theirs.imported_from or {}
        expected = {"team": team, "updated_by": mine.updated_by, "created_at": mine.created_at.isoformat()}
        if mine.deleted_by:
            expected["deleted_by"] = mine.deleted_by
        if said != expected:
            found.append(f"{where}: imported_from {said!r} != {expected!r}")
    return found


def versions_by_key(team: Team) -> dict[str, list[Memory]]:
    with operator_view():
        rows = list(
            Memory.objects.filter(team=team)
            .prefetch_related("annotations", "confirmations", "successors")
            .order_by("key", "created_at", "id")
        )
    by_key: dict[str, list[Memory]] = {}
    for row in rows:
        by_key.setdefault(row.key, []).append(row)
    return by_key


def place_of(by_key: dict[str, list[Memory]]) -> Callable[[Any], str | None]:
    places = {row.id: f"{key}#{n}" for key, rows in by_key.items() for n, row in enumerate(rows, start=1)}
    return lambda memory_id: None if memory_id is None else places.get(memory_id, "outside the team")


def differences(
    source: Memory,
    copy: Memory,
    *,
    fields: set[str],
    source_place: Callable[[Any], str | None],
    copy_place: Callable[[Any], str | None],
) -> list[str]:
    where = f"{source.key} ({source.state}, {source.created_at.isoformat()})"
    found = []
    for name in sorted(fields):
        if name in CARRIED:
            mine, theirs = getattr(source, name), getattr(copy, name)
        elif name == "metadata":
            mine = source.metadata
            theirs = {k: v for k, v in copy.metadata.items() if k != PROVENANCE}
        elif name in ("supersedes", "restored_from"):
            mine = source_place(getattr(source, f"{name}_id"))
            theirs = copy_place(getattr(copy, f"{name}_id"))
        elif name == "successors":
            mine = sorted(str(source_place(row.id)) for row in source.successors.all())
            theirs = sorted(str(copy_place(row.id)) for row in copy.successors.all())
        elif name == "annotations":
            mine = sorted((a.created_at, a.note, a.created_by) for a in source.annotations.all())
            theirs = sorted((a.created_at, a.note, a.created_by) for a in copy.annotations.all())
        elif name == "confirmations":
            mine = sorted((c.confirmed_at, c.confirmed_by, c.note) for c in source.confirmations.all())
            theirs = sorted((c.confirmed_at, c.confirmed_by, c.note) for c in copy.confirmations.all())
        else:
            raise AssertionError(f"no comparison for {name}")
        if mine != theirs:
            found.append(f"{where}: {name}: {mine!r} != {theirs!r}")
    return found


def attribution_differences(source: Memory, copy: Memory, *, importer: str, team: str) -> list[str]:
    """Every version is the importer's; the file's authors and time are its provenance."""
    found = []
    said = copy.metadata.get(PROVENANCE, {})
    for name in ATTRIBUTED:
        written = getattr(copy, name)
        if written != (importer if getattr(source, name) else ""):
            found.append(f"{source.key}: {name} is {written!r}, not the importer's")
        if said.get(name, "") != getattr(source, name):
            found.append(f"{source.key}: provenance {name} {said.get(name)!r} != {getattr(source, name)!r}")
    if said.get("team") != team or parse_datetime(said.get("created_at", "")) != source.created_at:
        found.append(f"{source.key}: provenance {said!r}")
    return found


@pytest.fixture
def empty_team_admin(db: None) -> Agent:
    return make_agent(TeamFactory(slug="charlie", name="Charlie"), "charlie-admin", ["admin"])


@pytest.mark.django_db
def test_a_json_lines_export_imported_into_an_empty_team_reproduces_every_field_of_every_version(
    team: Team, admin_member: Agent, empty_team_admin: Agent
) -> None:
    seed_every_field(team)

    response = import_file(empty_team_admin, export_body(admin_member))

    assert response.status_code == 200, response.content
    assert response.json()["errors"] == []
    source, copy = versions_by_key(team), versions_by_key(empty_team_admin.team)
    assert {key: len(rows) for key, rows in copy.items()} == {key: len(rows) for key, rows in source.items()}
    places = place_of(source)
    across_keys = {
        (places(row.id), link, places(getattr(row, f"{link}_id")))
        for rows in source.values()
        for row in rows
        for link in ("supersedes", "restored_from")
        if getattr(row, f"{link}_id")
        and not str(places(getattr(row, f"{link}_id"))).startswith(row.key + "#")
    }
    assert across_keys == {
        ("cache-policy#1", "supersedes", "reborn#2"),
        ("reborn#3", "supersedes", "cache-policy#1"),
    }
    compared = CARRIED | WITH_PROVENANCE | LINKS | RELATED
    problems = []
    for key, rows in source.items():
        for mine, theirs in zip(rows, copy[key], strict=True):
            problems += differences(
                mine, theirs, fields=compared, source_place=place_of(source), copy_place=place_of(copy)
            )
            problems += attribution_differences(mine, theirs, importer="charlie-admin", team="alpha")
    assert problems == []
    source_facts, copied_facts = fact_versions(team), fact_versions(empty_team_admin.team)
    assert len(source_facts) == len(copied_facts) == 6
    assert fact_differences(source_facts, copied_facts, importer="charlie-admin", team="alpha") == []
    assert response.json()["facts"] == {
        "created": 4,
        "superseded": 0,
        "unchanged": 0,
        "skipped": 0,
        "versions_written": 6,
    }


@pytest.mark.django_db(transaction=True)
def test_a_markdown_export_imported_into_an_empty_team_reproduces_every_field_of_its_versions(
    mcp_server: Server,  # noqa: F811
    team: Team,
    member: Agent,
    empty_team_admin: Agent,
    tmp_path: Path,
) -> None:
    seed_every_field(team)
    folder = tmp_path / "memory"

    exported = memoryhub(mcp_server, member, "export-markdown", str(folder))
    imported = memoryhub(mcp_server, empty_team_admin, "import-markdown", str(folder))

    assert exported.returncode == 0, exported.stderr
    assert imported.returncode == 0, imported.stdout + imported.stderr
    source = {key: rows[-1] for key, rows in versions_by_key(team).items() if rows[-1].is_active}
    copy = versions_by_key(empty_team_admin.team)
    assert sorted(copy) == sorted(source)
    assert all(len(rows) == 1 for rows in copy.values())
    compared = (CARRIED | WITH_PROVENANCE | LINKS | RELATED) - set(MARKDOWN_NOT_CARRIED)
    problems = []
    for key, mine in source.items():
        theirs = copy[key][0]
        problems += differences(mine, theirs, fields=compared, source_place=str, copy_place=str)
        if theirs.updated_by != "charlie-admin":
            problems.append(f"{key}: updated_by {theirs.updated_by!r}")
    assert problems == []


# Conversations (docs/conversations.md, "Export and import"): compared as they are.
CONVERSATION_CARRIED = {
    "session",
    "source",
    "title",
    "started_at",
    "ended_at",
    "created_at",
    "line_count",
    "char_count",
    "redactions",
}
CONVERSATION_EXCLUDED = {
    "id": "a new primary key in the importing team; the file's is in imported_from",
    "team": "the importing team",
    "created_by": "the importer stores it; the file's author is in imported_from",
    "imported_from": "compared: the file's team, id and author",
    "index_state": "derived: the importing team indexes it again",
    "owner": "set by the database from the importer's token (tests/teams/test_personal_entries.py)",
    "lines": "compared line by line",
    "chunks": "derived: the importing team indexes it again",
}


def test_every_conversation_field_is_compared_or_excluded_with_a_reason() -> None:
    assert model_fields(Conversation) == CONVERSATION_CARRIED | set(CONVERSATION_EXCLUDED)


@pytest.mark.django_db
def test_conversations_round_trip_into_an_empty_team_and_a_second_import_changes_nothing(
    team: Team, admin_member: Agent, empty_team_admin: Agent
) -> None:
    started = dt.datetime(2026, 3, 1, 9, 30, 12, 345678, tzinfo=dt.UTC)
    with team_scope(team.id):
        store_conversation(
            team=team,
            lines=[
                Line("user", "Which provider?"),
                Line("assistant", "Paddle, since March.\n\nSee the memo."),
            ],
            actor="ann",
            session="sess-1",
            title="billing",
            source="hook",
            started_at=started,
            ended_at=started + dt.timedelta(minutes=5),
            created_at=started + dt.timedelta(minutes=6),
        )
        store_conversation(team=team, lines=[Line("note", "only a note")], actor="bob")

    response = import_file(empty_team_admin, export_body(admin_member))

    assert response.status_code == 200, response.content
    assert response.json()["errors"] == []
    assert response.json()["conversations"] == {"created": 2, "unchanged": 0}
    with operator_view():
        source = list(Conversation.objects.filter(team=team).order_by("created_at"))
        copy = list(Conversation.objects.filter(team=empty_team_admin.team).order_by("created_at"))
        lines = {
            row.id: list(row.lines.order_by("number").values_list("number", "role", "text"))
            for row in source + copy
        }
    assert len(source) == len(copy) == 2
    for mine, theirs in zip(source, copy, strict=True):
        assert {name: getattr(mine, name) for name in CONVERSATION_CARRIED} == {
            name: getattr(theirs, name) for name in CONVERSATION_CARRIED
        }
        assert lines[mine.id] == lines[theirs.id]
        assert theirs.created_by == "charlie-admin"
        assert theirs.imported_from == {"team": "alpha", "id": str(mine.id), "created_by": mine.created_by}
    again = import_file(empty_team_admin, export_body(admin_member)).json()
    assert again["conversations"] == {"created": 0, "unchanged": 2}
    # The copy exported and imported back into the first team: it has them already.
    back = import_file(admin_member, export_body(empty_team_admin)).json()
    assert back["conversations"] == {"created": 0, "unchanged": 2}


@pytest.mark.django_db
def test_a_bad_conversation_record_is_reported_by_line_and_the_rest_applies(admin_member: Agent) -> None:
    header = {"record": "header", "format": "memoryhub-export", "version": 4, "team": "elsewhere"}
    good = {"record": "conversation", "id": "0d9f7a3c-1111-4000-8000-000000000001", "lines": [
        {"role": "user", "text": "the key is AKIAIOSFODNN7EXAMPLQ"}]}  # fmt: skip
    bad = {
        "record": "conversation",
        "id": "0d9f7a3c-1111-4000-8000-000000000002",
        "lines": [{"role": "User"}],
    }
    not_an_id = {"record": "conversation", "id": "x", "lines": [{"role": "user", "text": "hi"}]}
    body = "\n".join(json.dumps(line) for line in (header, good, bad, not_an_id)).encode()
    report = import_file(admin_member, body).json()
    assert report["conversations"] == {"created": 1, "unchanged": 0}
    assert [error["line"] for error in report["errors"]] == [3, 4]
    with operator_view():
        stored = Conversation.objects.get(team=admin_member.team)
        assert "AKIAIOSFODNN7EXAMPLQ" not in stored.lines.get().text
