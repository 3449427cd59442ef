"""GET export/ and POST import/: the format, the round trip, the conflict rules, bad
lines, scopes, other teams and the vault."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.signals import request_finished
from django.db import close_old_connections, connection

from memories.exporting import EXPORT_FORMAT, EXPORT_VERSION, export_records
from memories.models import Annotation, Memory
from teams.models import Team
from teams.scope import TEAM_ONLY, team_scope
from teams.services import set_vault_entry
from teams.streaming import team_json_lines
from tests.conftest import Agent, make_agent, operator_view
from tests.factories import TeamFactory
from tests.transfer.helpers import comparable, export_body, export_lines, import_file, seed_rich_team

pytestmark = pytest.mark.django_db


@pytest.fixture
def new_team_admin(db: None) -> Agent:
    return make_agent(TeamFactory(slug="charlie", name="Charlie"), "charlie-admin", ["admin"])


def team_rows(team: Team) -> list[tuple[Any, ...]]:
    with operator_view():
        memories = list(
            Memory.objects.filter(team=team)
            .order_by("key", "created_at")
            .values_list("id", "key", "content", "is_active", "deleted_at", "upvotes", "supersede_reason")
        )
        notes = list(Annotation.objects.filter(team=team).order_by("created_at").values_list("id", "note"))
    return [*memories, *notes]


def memory_line(key: str, content: str, **extra: Any) -> str:
    return json.dumps({"record": "memory", "key": key, "content": content, "type": "context", **extra})


HEADER = json.dumps({"record": "header", "format": EXPORT_FORMAT, "version": EXPORT_VERSION})
T1, T2 = "2026-01-02T03:04:05.000006+00:00", "2026-02-03T04:05:06+00:00"
PROVENANCE = "imported_from"


def provenance_of(record: dict[str, Any], *, team: str) -> dict[str, str]:
    """What an import keeps of a file's version: its team and who wrote it when."""
    names = ("updated_by", "created_at", "deleted_by", "archived_by")
    kept = {name: record[name] for name in names if record.get(name)}
    return {"team": team, **kept}


def without_attribution(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records without who wrote each version and the provenance an import adds."""
    out = []
    for record in records:
        if record["record"] == "memory":
            record = {k: v for k, v in record.items() if k not in ("updated_by", "deleted_by", "archived_by")}
            record["metadata"] = {k: v for k, v in record["metadata"].items() if k != PROVENANCE}
        out.append(record)
    return out


def test_export_is_json_lines_with_a_versioned_header_every_version_and_a_trailer(
    team: Team, admin_member: Agent
) -> None:
    seed_rich_team(team)

    records = export_lines(admin_member)

    header, *body, trailer = records
    assert header["record"] == "header"
    assert (header["format"], header["version"], header["team"]) == (EXPORT_FORMAT, EXPORT_VERSION, "alpha")
    memories = [r for r in body if r["record"] == "memory"]
    notes = [r for r in body if r["record"] == "annotation"]
    confirmations = [r for r in body if r["record"] == "confirmation"]
    assert trailer == {
        "record": "end",
        "memories": len(memories),
        "annotations": len(notes),
        "confirmations": len(confirmations),
        "facts": 0,
        "conversations": 0,
    }
    deploy = [r for r in memories if r["key"] == "deploy-steps"]
    assert [r["state"] for r in deploy] == ["superseded", "superseded", "active"]
    assert [r["supersede_kind"] for r in deploy] == ["", "soft", "hard"]
    assert deploy[1]["supersedes"] == deploy[0]["id"] and deploy[2]["supersedes"] == deploy[1]["id"]
    assert (deploy[2]["upvotes"], deploy[2]["downvotes"]) == (2, 1)
    assert {r["state"] for r in memories if r["key"] == "old-idea"} == {"deleted"}
    toggle = [r for r in memories if r["key"] == "toggle"]
    assert toggle[-1]["supersede_kind"] == "unsupersede" and toggle[-1]["restored_from"] == toggle[0]["id"]
    assert any(r["skill_trigger"] and r["skill_trigger"]["name"] == "release" for r in memories)
    assert any("learning" in r["metadata"] for r in memories)
    assert {n["note"] for n in notes} == {"first note", "still true in May"}


def test_round_trip_into_a_new_team_gives_the_same_records_written_by_the_importer(
    team: Team, admin_member: Agent, new_team_admin: Agent
) -> None:
    seed_rich_team(team)
    first = export_body(admin_member)

    response = import_file(new_team_admin, first)

    assert response.status_code == 200, response.content
    assert response.json()["errors"] == []
    again = [json.loads(line) for line in export_body(new_team_admin).decode().splitlines()]
    original = [json.loads(line) for line in first.decode().splitlines()]
    assert comparable(without_attribution(again)) == comparable(without_attribution(original))
    # Every version is the importing token's; the file's authors are kept as provenance.
    copies = [r for r in again if r["record"] == "memory"]
    sources = [r for r in original if r["record"] == "memory"]
    assert [r["key"] for r in copies] == [r["key"] for r in sources]
    for copy, source in zip(copies, sources, strict=True):
        assert copy["updated_by"] == "charlie-admin"
        assert copy.get("deleted_by") == (
            "charlie-admin" if source.get("deleted_by") else source.get("deleted_by")
        )
        assert copy.get("archived_by") == (
            "charlie-admin" if source.get("archived_by") else source.get("archived_by")
        )
        assert copy["metadata"][PROVENANCE] == provenance_of(source, team="alpha")


def test_imported_versions_are_written_by_the_importing_token_with_the_files_authors_as_provenance(
    team: Team, admin_member: Agent, save: Any
) -> None:
    save(admin_member, "existing", "Restart the worker by hand.")
    header = json.dumps(
        {"record": "header", "format": EXPORT_FORMAT, "version": EXPORT_VERSION, "team": "zulu"}
    )
    release = {"name": "release", "keywords": ["release"], "always_on": False}
    lines = [
        header,
        # A key new to the team (the bulk path), with two versions.
        memory_line("runbook", "Restart by hand.", id="r1", updated_by="owner", created_at=T1),
        memory_line(
            "runbook",
            "Restart with make restart.",
            id="r2",
            updated_by="ann",
            created_at=T2,
            supersede_reason="x",
        ),
        # A skill (the service path), a deleted key, and a key the team has (superseded).
        memory_line(
            "release-skill", "Tag, build, publish.", updated_by="owner", created_at=T1, skill_trigger=release
        ),
        memory_line("old-idea", "Try a monorepo.", updated_by="owner", state="deleted", deleted_by="owner"),
        memory_line("existing", "Restart with make restart.", updated_by="owner", created_at=T2),
    ]

    response = import_file(admin_member, "\n".join(lines).encode())

    assert response.status_code == 200, response.content
    assert response.json()["errors"] == []

    def history(key: str) -> list[tuple[str, str, Any]]:
        events = admin_member.client.get(admin_member.url(f"memories/{key}/history/")).json()["history"]
        return [(e["kind"], e["by"], e["memory"]["metadata"].get(PROVENANCE)) for e in events]

    assert history("runbook") == [
        ("hard", "admin-bot", {"team": "zulu", "updated_by": "ann", "created_at": T2}),
        ("created", "admin-bot", {"team": "zulu", "updated_by": "owner", "created_at": T1}),
    ]
    assert history("release-skill") == [
        ("created", "admin-bot", {"team": "zulu", "updated_by": "owner", "created_at": T1}),
    ]
    deleted = {"team": "zulu", "updated_by": "owner", "deleted_by": "owner"}
    # (Deleted at the moment it was written: the two events tie on time.)
    assert sorted(history("old-idea")) == [
        ("created", "admin-bot", deleted),
        ("deleted", "admin-bot", deleted),
    ]
    assert history("existing") == [
        ("hard", "admin-bot", {"team": "zulu", "updated_by": "owner", "created_at": T2}),
        ("created", "admin-bot", None),
    ]


def test_provenance_is_no_change_and_an_entry_imported_again_keeps_its_first_origin(
    team: Team, admin_member: Agent, new_team_admin: Agent
) -> None:
    seed_rich_team(team)
    original = export_body(admin_member)
    assert import_file(new_team_admin, original).status_code == 200
    copied = export_body(new_team_admin)
    third = make_agent(TeamFactory(slug="delta", name="Delta"), "delta-admin", ["admin"])

    back = import_file(admin_member, copied).json()
    onward = import_file(third, copied)

    assert (back["created"], back["superseded"], back["versions_written"]) == (0, 0, 0)
    assert set(back["keys"].values()) == {"unchanged"}
    assert onward.status_code == 200 and onward.json()["errors"] == []
    sources = [json.loads(line) for line in original.decode().splitlines()]
    sources = [r for r in sources if r["record"] == "memory"]
    copies = [r for r in export_lines(third) if r["record"] == "memory"]
    assert [r["updated_by"] for r in copies] == ["delta-admin"] * len(sources)
    assert [r["metadata"][PROVENANCE] for r in copies] == [provenance_of(r, team="alpha") for r in sources]


@pytest.mark.parametrize("created_at", ["yesterday", "2026-13-45T00:00:00+00:00", 20260102])
def test_a_created_at_that_is_not_a_time_is_a_bad_line(
    team: Team, admin_member: Agent, created_at: Any
) -> None:
    body = f"{HEADER}\n{memory_line('k', 'v', created_at=created_at)}\n".encode()

    response = import_file(admin_member, body)

    assert response.status_code == 200
    assert [(e["line"], e["error"]) for e in response.json()["errors"]] == [(2, "invalid")]
    assert response.json()["keys"] == {}


def test_importing_the_same_file_twice_changes_nothing(
    team: Team, admin_member: Agent, new_team_admin: Agent
) -> None:
    seed_rich_team(team)
    body = export_body(admin_member)
    assert import_file(new_team_admin, body).status_code == 200
    before = team_rows(new_team_admin.team)

    second = import_file(new_team_admin, body)

    assert second.status_code == 200
    report = second.json()
    assert (
        report["created"]
        == report["superseded"]
        == report["versions_written"]
        == report["notes_written"]
        == 0
    )
    assert report["unchanged"] == len({r.split("#")[0] for r in report["keys"]})
    assert team_rows(new_team_admin.team) == before


def test_existing_keys_are_superseded_with_reason_imported(
    team: Team, admin_member: Agent, save: Any
) -> None:
    save(admin_member, "runbook", "Restart the worker by hand.")
    body = f"{HEADER}\n{memory_line('runbook', 'Restart the worker with make restart.')}\n".encode()

    response = import_file(admin_member, body)

    assert response.status_code == 200
    assert response.json()["keys"] == {"runbook": "superseded"}
    with team_scope(team.id):
        active = Memory.objects.get(team=team, key="runbook", is_active=True)
    assert active.content == "Restart the worker with make restart."
    assert active.supersede_reason == "imported"
    assert active.updated_by == "admin-bot"


def test_skip_existing_leaves_existing_keys_and_still_creates_new_ones(
    team: Team, admin_member: Agent, save: Any
) -> None:
    save(admin_member, "runbook", "Restart the worker by hand.")
    lines = [HEADER, memory_line("runbook", "Something else."), memory_line("fresh-key", "A new fact.")]

    response = import_file(admin_member, "\n".join(lines).encode(), skip_existing="true")

    assert response.status_code == 200
    assert response.json()["keys"] == {"runbook": "skipped", "fresh-key": "created"}
    with team_scope(team.id):
        assert (
            Memory.objects.get(team=team, key="runbook", is_active=True).content
            == "Restart the worker by hand."
        )
        assert Memory.objects.filter(team=team, key="fresh-key", is_active=True).exists()


def test_dry_run_reports_what_would_change_and_changes_nothing(
    team: Team, admin_member: Agent, save: Any, django_capture_on_commit_callbacks: Any
) -> None:
    save(admin_member, "runbook", "Restart the worker by hand.")
    before = team_rows(team)
    lines = [HEADER, memory_line("runbook", "Something else."), memory_line("fresh-key", "A new fact.")]

    with django_capture_on_commit_callbacks() as enqueued:
        response = import_file(admin_member, "\n".join(lines).encode(), dry_run="true")

    assert response.status_code == 200
    report = response.json()
    assert report["dry_run"] is True
    assert report["keys"] == {"runbook": "superseded", "fresh-key": "created"}
    assert report["versions_written"] == 2
    assert team_rows(team) == before
    assert enqueued == []  # nothing handed to the indexing workers either


BAD_LINES = [
    ("{not json", "malformed_json"),
    (json.dumps({"record": "memory", "key": "k1", "content": 5, "type": "context"}), "invalid"),
    (
        json.dumps({"record": "memory", "key": "k2", "content": "a\u0000b", "type": "context"}),
        "invalid_characters",
    ),
    (json.dumps({"record": "memory", "key": "k3", "content": "x", "type": "gossip"}), "unknown_type"),
    (json.dumps({"record": "memory", "key": "bad key!", "content": "x"}), "invalid"),
    (json.dumps([1, 2]), "invalid"),
    (json.dumps({"record": "memory", "key": "k4", "content": "x", "upvotes": "many"}), "invalid"),
    (json.dumps({"record": "memory", "key": "k5", "content": "x" * 70_000}), "content_too_large"),
    (json.dumps({"record": "memory", "key": "k6", "content": "x", "project": "p" * 201}), "invalid"),
    (json.dumps({"record": "memory", "key": "k7", "content": "x", "upvotes": 2**31}), "invalid"),
    (json.dumps({"record": "memory", "key": "k8", "content": "x", "metadata": [1]}), "invalid"),
    (
        json.dumps({"record": "memory", "key": "k9", "content": "x", "skill_trigger": {"name": "Bad Name"}}),
        "invalid",
    ),
    (json.dumps({"record": "gossip"}), "invalid"),
]


def bad_file() -> bytes:
    lines = [HEADER, memory_line("good-one", "A good fact.")]
    lines += [line for line, _ in BAD_LINES]
    lines.append(memory_line("good-two", "Another good fact."))
    return "\n".join(lines).encode()


def test_bad_lines_are_reported_with_their_line_number_and_skipped(team: Team, admin_member: Agent) -> None:
    response = import_file(admin_member, bad_file())

    assert response.status_code == 200, response.content
    report = response.json()
    assert [(e["line"], e["error"]) for e in report["errors"]] == [
        (number, code) for number, (_, code) in enumerate(BAD_LINES, start=3)
    ]
    assert report["keys"] == {"good-one": "created", "good-two": "created"}


def test_strict_refuses_the_whole_file_with_nothing_applied(team: Team, admin_member: Agent) -> None:
    response = import_file(admin_member, bad_file(), strict="true")

    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "import_refused"
    assert [line["line"] for line in body["lines"]] == list(range(3, 3 + len(BAD_LINES)))
    with operator_view():
        assert not Memory.objects.filter(team=team).exists()


def test_strict_refuses_a_line_the_services_refuse_after_applying_others(
    team: Team, admin_member: Agent
) -> None:
    lines = [HEADER, memory_line("good-one", "A good fact."), memory_line("too-big", "x" * 70_000)]

    response = import_file(admin_member, "\n".join(lines).encode(), strict="true")

    assert response.status_code == 400
    assert response.json()["lines"][0]["line"] == 3
    with operator_view():
        assert not Memory.objects.filter(team=team).exists()


@pytest.mark.parametrize(
    ("body", "content_type", "status", "code"),
    [
        (b"", "application/jsonl", 400, "invalid"),
        (b'{"record": "memory", "key": "a", "content": "b"}\n', "application/jsonl", 400, "invalid"),
        (
            b'{"record": "header", "format": "memoryhub-export", "version": 99}\n',
            "application/jsonl",
            400,
            "invalid",
        ),
        (b"\x00\x01\x02", "application/jsonl", 400, "invalid"),
        (b"\xff\xfe", "application/jsonl", 400, "invalid"),
        (b'{"a": 1}', "application/json", 415, "unsupported_media_type"),
    ],
)
def test_a_body_that_is_not_an_export_answers_4xx_in_the_error_shape(
    team: Team, admin_member: Agent, body: bytes, content_type: str, status: int, code: str
) -> None:
    response = admin_member.client.post(admin_member.url("import/"), data=body, content_type=content_type)

    assert response.status_code == status
    assert response.json()["error"] == code and isinstance(response.json()["detail"], str)


def test_a_body_over_the_limit_answers_413(team: Team, admin_member: Agent, settings: Any) -> None:
    settings.MAX_REQUEST_BODY_BYTES = 1000
    body = f"{HEADER}\n{memory_line('big', 'x' * 2000)}\n".encode()

    response = import_file(admin_member, body)

    assert response.status_code == 413
    assert response.json()["error"] == "body_too_large"


@pytest.mark.parametrize("agent_name", ["member", "readonly_member"])
def test_export_and_import_need_the_admin_scope(
    team: Team, agent_name: str, request: pytest.FixtureRequest
) -> None:
    agent: Agent = request.getfixturevalue(agent_name)
    exported = agent.client.get(agent.url("export/"))
    imported = import_file(agent, f"{HEADER}\n{memory_line('k', 'v')}\n".encode())

    assert exported.status_code == imported.status_code == 403
    assert exported.json()["error"] == imported.json()["error"] == "forbidden"
    with operator_view():
        assert not Memory.objects.filter(team=team).exists()


def test_another_teams_admin_token_gets_404_and_no_byte_of_the_team(
    team: Team, admin_member: Agent, outsider: Agent
) -> None:
    seed_rich_team(team)

    exported = outsider.client.get(admin_member.url("export/"))
    imported = import_file(
        Agent(team=team, token=outsider.token, client=outsider.client),
        f"{HEADER}\n{memory_line('k', 'v')}\n".encode(),
    )

    for response in (exported, imported):
        assert response.status_code == 404
        assert response.json() == {"error": "not_found", "detail": "not found"}
        for marker in (b"alpha", b"deploy", b"Deploy", b"release"):
            assert marker not in response.content
    with operator_view():
        assert not Memory.objects.filter(team=team, key="k").exists()


def test_the_outsiders_own_export_holds_nothing_of_the_other_team(
    team: Team, admin_member: Agent, outsider: Agent
) -> None:
    seed_rich_team(team)

    body = export_body(outsider)

    assert b"deploy" not in body and b"alpha" not in body
    assert [json.loads(line)["record"] for line in body.decode().splitlines()] == ["header", "end"]


def test_a_vault_secret_in_a_memory_is_never_exported_in_clear(team: Team, admin_member: Agent) -> None:
    with team_scope(team.id):
        from memories.writes import save_memory

        save_memory(team=team, key="db-access", content="The db answers to plumtree-4471-zq.", updated_by="a")
        # Added after the text was written (in words no credential rule reads as one):
        # the stored text still holds it.
        set_vault_entry(team=team, key="db-password", value="plumtree-4471-zq", is_secret=True, actor="a")
        assert "plumtree-4471-zq" in Memory.objects.get(team=team, key="db-access").content

    body = export_body(admin_member)

    assert b"plumtree-4471-zq" not in body
    assert b"db-password" not in body  # the vault itself is not exported
    assert b"The db answers to" in body


def test_the_export_is_streamed_from_a_server_side_cursor(team: Team, admin_member: Agent) -> None:
    """Constant memory: rows come from a cursor the database holds open while the body
    is sent, a chunk at a time, never from a list of the whole team."""
    with team_scope(team.id):
        Memory.objects.bulk_create(
            Memory(
                team=team,
                key=f"bulk-{n:05d}",
                content=f"fact {n}",
                content_hash=Memory.hash_content(f"fact {n}"),
            )
            for n in range(2500)
        )
    response = admin_member.client.get(admin_member.url("export/"))
    assert response.streaming
    chunks = iter(response.streaming_content)

    first = next(chunks)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_cursors WHERE NOT is_holdable")
        open_cursors = cursor.fetchone()[0]
    rest = b"".join(chunks)

    assert open_cursors >= 1
    assert len(first.splitlines()) < 2500
    lines = (first + rest).decode().splitlines()
    assert len(lines) == 2500 + 2
    assert json.loads(lines[-1]) == {
        "record": "end",
        "memories": 2500,
        "annotations": 0,
        "confirmations": 0,
        "facts": 0,
        "conversations": 0,
    }


def test_imported_memories_are_scrubbed_like_every_write(team: Team, admin_member: Agent) -> None:
    secret = "AKIA" + "ABCDEFGHIJKLMNOP"
    body = f"{HEADER}\n{memory_line('aws-note', f'The key is {secret} for the bucket.')}\n".encode()

    assert import_file(admin_member, body).status_code == 200

    with team_scope(team.id):
        assert secret not in Memory.objects.get(team=team, key="aws-note").content
    # And importing the same file again sees the scrubbed entry as unchanged.
    assert import_file(admin_member, body).json()["keys"] == {"aws-note": "unchanged"}


def test_a_client_that_goes_away_mid_stream_leaves_no_cursor_or_team_binding_behind(team: Team) -> None:
    with team_scope(team.id):
        Memory.objects.bulk_create(
            Memory(
                team=team,
                key=f"bulk-{n:05d}",
                content=f"fact {n}",
                content_hash=Memory.hash_content(f"fact {n}"),
            )
            for n in range(1500)
        )
    # The response the export view answers with, taken straight (the test client would
    # wrap it and close the test's own connection at the end of the request).
    stream = team_json_lines(team_id=team.id, viewer=TEAM_ONLY, produce=lambda: export_records(team=team))
    next(iter(stream.streaming_content))
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), current_setting('memoryhub.team_id', true) FROM pg_cursors")
        assert cursor.fetchone() == (1, str(team.id))

    request_finished.disconnect(close_old_connections)
    try:
        stream.close()  # what the server does when the client disconnects
    finally:
        request_finished.connect(close_old_connections)

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), current_setting('memoryhub.team_id', true) FROM pg_cursors")
        open_cursors, binding = cursor.fetchone()
    assert open_cursors == 0
    assert not binding
