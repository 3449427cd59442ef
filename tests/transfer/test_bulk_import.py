"""The import's bulk path (memories.writes._new_keys): keys new to the team are built by
the pipeline's own stages and inserted in bulk; when the database refuses a batch, each
key is inserted again on its own and must store the same. It keeps the quota and the
skill names, and its entries are still indexed by a real worker."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import IntegrityError, connection
from django.test.utils import CaptureQueriesContext

from memories.exporting import EXPORT_FORMAT, EXPORT_VERSION
from memories.models import Memory
from memories.writes import _new_keys
from teams.models import Team
from teams.scope import team_scope
from teams.services import set_vault_entry
from tests.conftest import Agent, make_agent, operator_view
from tests.factories import TeamFactory
from tests.transfer.helpers import comparable, export_body, export_lines, import_file, seed_rich_team
from tests.worker import INDEX_SECONDS, CeleryProcess, TaskRoute, wait_for

TOPICS = ("Deploys", "Billing retries", "Cache eviction", "Login tokens", "Backups", "Feature flags")
HEADER = json.dumps({"record": "header", "format": EXPORT_FORMAT, "version": EXPORT_VERSION})
SECRET = "hunter2-but-much-longer-0xC0FFEE"


def admin_of(slug: str) -> Agent:
    # One token name in every team: an import writes its versions as the importing token.
    return make_agent(TeamFactory(slug=slug, name=slug.title()), "team-admin", ["admin"])


def file_with_secret_mentions() -> bytes:
    lines = [
        HEADER,
        json.dumps(
            {
                "record": "memory",
                "id": "c1",
                "key": "creds",
                "content": f"The DB password is {SECRET}.",
                "type": "context",
                "metadata": {"hint": SECRET},
            }
        ),
        json.dumps(
            {
                "record": "memory",
                "id": "c2",
                "key": "creds",
                "content": "The DB password is in the vault.",
                "type": "context",
                "supersede_reason": "minor correction",
                "upvotes": 3,
            }
        ),
        json.dumps({"record": "annotation", "memory": "c1", "note": f"was {SECRET}", "created_by": "x"}),
        json.dumps({"record": "annotation", "memory": "c2", "note": "moved", "created_by": ""}),
    ]
    return "\n".join(lines).encode()


def stored_columns(team: Team) -> list[tuple[Any, ...]]:
    """What the export leaves out and a write still sets, in the order of the history."""
    return list(
        Memory.objects.filter(team=team)
        .order_by("key", "created_at")
        .values_list("key", "content_hash", "index_state", "anchor", "confirmed_by_count", "index_attempts")
    )


def refused_lines_file() -> bytes:
    """Lines the services refuse, each in a key of its own, between good keys."""
    records: list[dict[str, Any]] = [
        {"id": "g1", "key": "good-1", "content": "A good fact."},
        {"id": "b1", "key": "AKIAIOSFODNN7EXAMPLE", "content": "The key looks like a credential."},
        {"id": "b2", "key": "long-reason", "content": "First."},
        {"id": "b3", "key": "long-reason", "content": "Second.", "supersede_reason": "x" * 2001},
        {"id": "b4", "key": "empty-note", "content": "Has an empty note."},
        {"id": "g2", "key": "good-2", "content": "Another good fact."},
    ]
    lines = [HEADER, *(json.dumps({"record": "memory", **record}) for record in records)]
    lines.append(json.dumps({"record": "annotation", "memory": "b4", "note": "   "}))
    return "\n".join(lines).encode()


def refuse_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """The database refuses every batch insert: each key is inserted on its own."""

    def refused(writer: Any, planned: Any) -> None:
        raise IntegrityError("refused for the test")

    monkeypatch.setattr(_new_keys.NewKeyWriter, "_insert", refused)


@pytest.mark.django_db
def test_lines_the_pipeline_refuses_are_reported_alike_in_a_batch_and_key_by_key(
    team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    bulk, services_only = admin_of("bulk"), admin_of("slow")

    bulk_report = import_file(bulk, refused_lines_file()).json()
    strict = import_file(bulk, refused_lines_file(), strict="true")
    refuse_batches(monkeypatch)
    slow_report = import_file(services_only, refused_lines_file()).json()

    assert [(e["line"], e["error"]) for e in bulk_report["errors"]] == [
        (3, "invalid"),
        (5, "invalid"),
        (6, "invalid"),
    ]
    assert bulk_report == slow_report
    assert bulk_report["keys"] == {"good-1": "created", "good-2": "created"}
    assert strict.status_code == 400
    assert comparable(export_lines(bulk))[1:] == comparable(export_lines(services_only))[1:]


@pytest.mark.django_db
def test_a_batch_insert_and_its_key_by_key_fallback_store_the_same(
    team: Team, admin_member: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed_rich_team(team)
    exported = export_body(admin_member)
    extra = file_with_secret_mentions()
    bulk, services_only = admin_of("bulk"), admin_of("slow")
    for agent in (bulk, services_only):
        with team_scope(agent.team.id):
            set_vault_entry(team=agent.team, key="db-password", value=SECRET, is_secret=True, actor="test")

    bulk_reports = [import_file(bulk, body).json() for body in (exported, extra)]
    refuse_batches(monkeypatch)
    slow_reports = [import_file(services_only, body).json() for body in (exported, extra)]

    assert bulk_reports == slow_reports
    assert comparable(export_lines(bulk))[1:] == comparable(export_lines(services_only))[1:]
    assert SECRET.encode() not in export_body(bulk)
    with operator_view():
        assert stored_columns(bulk.team) == stored_columns(services_only.team)
        assert all(row.last_confirmed_at == row.created_at for row in Memory.objects.filter(team=bulk.team))
        # Rows inserted in one statement still have strictly ordered timestamps.
        for key in ("deploy-steps", "toggle", "reborn", "creds"):
            stamps = list(
                Memory.objects.filter(team=bulk.team, key=key)
                .order_by("created_at")
                .values_list("created_at", flat=True)
            )
            assert len(set(stamps)) == len(stamps)
        deleted = Memory.objects.filter(team=bulk.team, deleted_at__isnull=False)
        assert deleted.exists() and all(row.deleted_at >= row.created_at for row in deleted)


@pytest.mark.django_db
def test_a_file_of_new_keys_is_written_in_a_few_queries_not_a_few_per_version(
    team: Team, admin_member: Agent
) -> None:
    lines = [HEADER]
    for n in range(200):
        lines.append(
            json.dumps({"record": "memory", "id": f"m{n}", "key": f"fact-{n}", "content": f"Fact {n}."})
        )
        lines.append(json.dumps({"record": "annotation", "memory": f"m{n}", "note": f"note {n}"}))
    body = "\n".join(lines).encode()

    with CaptureQueriesContext(connection) as queries:
        response = import_file(admin_member, body)

    assert response.status_code == 200
    assert response.json()["created"] == 200 and response.json()["notes_written"] == 200
    # The service path took ~20 per version (4,000 here); what is left is per request and per batch.
    assert len(queries) < 60, len(queries)
    # Importing it again changes nothing.
    again = import_file(admin_member, body).json()
    assert (again["created"], again["unchanged"], again["versions_written"]) == (0, 200, 0)


@pytest.mark.django_db
def test_the_memory_quota_holds_on_the_bulk_path(
    team: Team, admin_member: Agent, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.MEMORYHUB_QUOTA_MEMORIES = 3
    lines = [HEADER]
    lines.append(
        json.dumps(
            {"record": "memory", "id": "g1", "key": "gone", "content": "Soon deleted.", "state": "deleted"}
        )
    )
    for n in range(4):
        lines.append(
            json.dumps({"record": "memory", "id": f"k{n}", "key": f"key-{n}", "content": f"Fact {n}."})
        )
    body = "\n".join(lines).encode()

    response = import_file(admin_member, body)

    report = response.json()
    assert report["created"] == 4  # the deleted key frees its place
    assert [(error["line"], error["error"]) for error in report["errors"]] == [(6, "quota_exceeded")]
    with operator_view():
        assert Memory.objects.filter(team=team, is_active=True).count() == 3
        assert not Memory.objects.filter(team=team, key="key-3").exists()


@pytest.mark.django_db(transaction=True)
def test_an_import_is_indexed_by_the_worker_in_a_few_batch_messages(
    worker: CeleryProcess, task_route: TaskRoute, team: Team, admin_member: Agent
) -> None:
    seed_rich_team(team)
    exported = export_body(admin_member)
    lines = [HEADER] + [
        json.dumps({"record": "memory", "key": f"bulk-{n}", "content": f"{TOPICS[n % 6]} note {n}."})
        for n in range(120)
    ]
    target = admin_of("target")
    task_route.published.clear()

    assert import_file(target, exported).status_code == 200
    assert import_file(target, "\n".join(lines).encode()).status_code == 200

    with operator_view():
        imported = Memory.objects.filter(team=target.team)
        total = imported.count()

        def all_indexed() -> bool:
            return imported.filter(index_state="indexed").count() == total

        try:
            # A hang detector: the worker also runs freshness's checks per entry.
            wait_for(all_indexed, 3 * INDEX_SECONDS, "every imported memory to be indexed")
        except AssertionError:
            states = list(imported.values_list("index_state", "index_queued_at"))
            raise AssertionError(
                f"{sorted(set(states))[:5]} {len(states)}\n{worker.log_since(0)[-3000:]}"
            ) from None
    batches = task_route.task_ids("search.index_memories")
    # 120 new keys in batches of 100, plus the rich file's one batch (its skill included).
    assert len(batches) <= 3
    assert task_route.task_ids("search.index_memory") == []
