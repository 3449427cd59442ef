"""The write side of personal entries (memories.personal.PersonalNames): who writes is read
once per batch or import, not once per entry; the team's own jobs and commands (viewer
`*`) get a clean `personal_entry` error, never the database trigger's, for a name whose
owner is no member; and hostile names are a 4xx in linear time. Who sees what:
tests/teams/test_personal_entries.py."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AbstractUser
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework import serializers

from core.errors import InvalidInput
from memories import writes
from memories.facts.models import Fact
from memories.facts.services import set_fact
from memories.inputs import key_field
from memories.models import Memory
from memories.personal import PersonalNameRefused, PersonalNames, personal_owner_name
from memories.writes.batch import BatchEntry
from teams import memberships
from teams.models import Membership, Team
from teams.scope import team_scope
from teams.validators import is_key
from tests.conftest import Agent, operator_view
from tests.linear_time import assert_linear_time
from tests.teams.test_personal_entries import join, personal_agent
from tests.transfer.helpers import import_file

HEADER = {"record": "header", "format": "memoryhub-export", "version": 3, "team": "elsewhere"}
# The transaction's viewer: written once by a request's binding, read by the personal check.
VIEWER = "memoryhub.viewer"
MEMBERSHIPS = "teams_membership"


def export_lines(*records: dict[str, Any]) -> bytes:
    return "\n".join(json.dumps(record) for record in (HEADER, *records)).encode()


def line_id(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def memory_line(key: str, content: str) -> dict[str, Any]:
    return {"record": "memory", "id": f"m-{line_id(key)}", "key": key, "content": content}


def fact_line(entity: str, value: str) -> dict[str, Any]:
    return {"record": "fact", "id": f"f-{line_id(entity)}", "entity": entity, "key": "editor", "value": value}


def queries_naming(text: str, call: Callable[[], object]) -> int:
    """How many of the queries `call` runs name `text` (a setting, a table)."""
    with CaptureQueriesContext(connection) as captured:
        call()
    return sum(text in query["sql"] for query in captured.captured_queries)


@pytest.fixture
def mia_user(team: Team, django_user_model: Any) -> AbstractUser:
    user = django_user_model.objects.create_user("mia", "mia@example.com", "pw-for-mia-1234")
    join(team, user, Membership.Role.ADMIN)  # an import takes the admin scope
    return user


@pytest.fixture
def max_user(team: Team, django_user_model: Any) -> AbstractUser:
    user = django_user_model.objects.create_user("max", "max@example.com", "pw-for-max-1234")
    join(team, user, Membership.Role.MEMBER)
    return user


@pytest.fixture
def mia(team: Team, mia_user: AbstractUser) -> Agent:
    return personal_agent(team, mia_user, ["read", "write", "admin"], "mia-laptop")


# --- Who writes is read once per batch and per import -------------------------------


def test_a_batch_of_twenty_personal_entries_reads_the_viewer_no_more_than_a_batch_of_one(mia: Agent) -> None:
    def batch(prefix: str, size: int) -> Callable[[], object]:
        entries = [{"key": f"@mia:{prefix}-{n}", "content": f"{prefix} note {n} of mia"} for n in range(size)]

        def post() -> None:
            response = mia.client.post(mia.url("memories/batch/"), {"entries": entries}, format="json")
            assert response.status_code == 200, response.content
            assert response.json()["counts"]["created"] == size, response.content

        return post

    one = queries_naming(VIEWER, batch("one", 1))
    twenty = queries_naming(VIEWER, batch("twenty", 20))
    assert one >= 1  # the request binds the viewer: the count sees the setting
    assert twenty == one, (one, twenty)


def test_an_import_of_twenty_personal_keys_and_facts_reads_the_viewer_no_more_than_one(mia: Agent) -> None:
    def file_of(prefix: str, size: int, text: str) -> bytes:
        return export_lines(
            *(memory_line(f"@mia:{prefix}-{n}", f"{text} {n}") for n in range(size)),
            *(fact_line(f"@mia:{prefix}-{n}", f"{text} {n}") for n in range(size)),
        )

    def imported(body: bytes) -> Callable[[], object]:
        def post() -> None:
            response = import_file(mia, body)
            assert response.status_code == 200 and not response.json()["errors"], response.content

        return post

    for size in (1, 20):
        # New keys (the bulk path), then the same keys again with other texts (the
        # existing keys' path, fact by fact through set_fact).
        created = queries_naming(VIEWER, imported(file_of(f"n{size}", size, "first")))
        superseded = queries_naming(VIEWER, imported(file_of(f"n{size}", size, "second")))
        if size == 1:
            baseline = (created, superseded)
    assert (created, superseded) == baseline, (baseline, (created, superseded))
    with operator_view():
        assert Memory.objects.filter(key__startswith="@mia:n20-", is_active=True).count() == 20
        assert Fact.objects.filter(entity__startswith="@mia:n20-", value__startswith="second").count() == 20


def test_an_operators_batch_reads_the_viewer_and_the_members_once(
    team: Team, mia_user: AbstractUser, max_user: AbstractUser
) -> None:
    def batch(prefix: str, size: int) -> Callable[[], object]:
        entries = [
            BatchEntry(index=n, key=f"@{('mia', 'max')[n % 2]}:{prefix}-{n}", content=f"{prefix} text {n}")
            for n in range(size)
        ]

        def save() -> None:
            with team_scope(team.id):
                outcomes = writes.save_batch(team=team, entries=entries, updated_by="manage.py")
            assert [outcome.status for outcome in outcomes] == ["created"] * size

        return save

    one = queries_naming(VIEWER, batch("one", 1)), queries_naming(MEMBERSHIPS, batch("uno", 1))
    twenty = queries_naming(VIEWER, batch("twenty", 20)), queries_naming(MEMBERSHIPS, batch("zwanzig", 20))
    assert twenty == one, (one, twenty)


# --- The team's own jobs and commands: a name that is no member's ---------------------


def test_an_operators_save_of_a_strangers_name_is_refused_before_the_database(
    team: Team, mia_user: AbstractUser
) -> None:
    with team_scope(team.id):
        with pytest.raises(PersonalNameRefused, match="no member of the team is named nobody") as refused:
            writes.save_memory(team=team, key="@nobody:notes", content="whose?", updated_by="manage.py")
        assert (refused.value.status, refused.value.code) == (403, "personal_entry")
        with pytest.raises(PersonalNameRefused, match="named nobody"):
            set_fact(team=team, entity="@nobody", key="editor", value="vim", actor="manage.py")
        # A member's name still goes through, owned by that member.
        writes.save_memory(team=team, key="@mia:notes", content="mia's", updated_by="manage.py")
        set_fact(team=team, entity="@mia", key="editor", value="helix", actor="manage.py")
    with operator_view():
        assert not Memory.objects.filter(key="@nobody:notes").exists()
        assert not Fact.objects.filter(entity="@nobody").exists()
        assert Memory.objects.get(key="@mia:notes").owner_id == mia_user.pk
        assert Fact.objects.get(entity="@mia").owner_id == mia_user.pk


def test_an_operators_batch_reports_a_strangers_entry_and_stores_the_others(
    team: Team, mia_user: AbstractUser
) -> None:
    entries = [
        BatchEntry(index=0, key="@nobody:notes", content="whose notes are these?"),
        BatchEntry(index=1, key="@mia:notes", content="mia's own notes"),
        BatchEntry(index=2, key="team-notes", content="the team's notes"),
    ]
    with team_scope(team.id):
        outcomes = writes.save_batch(team=team, entries=entries, updated_by="manage.py")
    assert [outcome.status for outcome in outcomes] == ["error", "created", "created"]
    error = outcomes[0].error
    assert error is not None and error.code == "personal_entry" and "nobody" in error.detail
    with operator_view():
        assert sorted(Memory.objects.values_list("key", flat=True)) == ["@mia:notes", "team-notes"]


def test_an_operators_import_reports_a_strangers_lines_and_imports_the_rest(
    team: Team, mia_user: AbstractUser, max_user: AbstractUser
) -> None:
    # max leaves the team: his entry stays, but no one may write under his name any more
    # (the existing key's path); nobody never was a member (the new keys' path).
    with team_scope(team.id):
        writes.save_memory(team=team, key="@max:notes", content="max's notes", updated_by="max")
        set_fact(team=team, entity="@max", key="editor", value="emacs", actor="max")
        memberships.remove_member(
            team=team, membership_id=Membership.objects.get(team=team, user_id=max_user.pk).pk, by=None
        )
    body = export_lines(
        memory_line("@nobody:notes", "whose notes are these?"),  # line 2
        memory_line("@max:notes", "max's notes, edited after he left"),  # line 3
        memory_line("@mia:notes", "mia's own notes"),
        memory_line("team-notes", "the team's notes"),
        fact_line("@nobody", "nano"),  # line 6
        fact_line("@max", "vim"),  # line 7
        fact_line("@mia", "helix"),
    )
    with team_scope(team.id):
        report = writes.import_export(team=team, raw=body, actor="manage.py").as_dict()
    assert [(error["line"], error["error"]) for error in report["errors"]] == [
        (2, "personal_entry"),
        (3, "personal_entry"),
        (6, "personal_entry"),
        (7, "personal_entry"),
    ], report["errors"]
    assert "named nobody" in report["errors"][0]["detail"] and "named max" in report["errors"][1]["detail"]
    assert report["keys"] == {"@mia:notes": "created", "team-notes": "created"}
    assert report["facts"]["created"] == 1
    with operator_view():
        assert Memory.objects.get(key="@max:notes", is_active=True).content == "max's notes"
        assert Fact.objects.get(entity="@max", is_active=True).value == "emacs"
        assert Fact.objects.get(entity="@mia").owner_id == mia_user.pk
        assert not Memory.objects.filter(key="@nobody:notes").exists()


def test_a_persons_import_of_a_strangers_name_gets_the_same_per_line_error(mia: Agent) -> None:
    body = export_lines(memory_line("@nobody:notes", "whose?"), memory_line("team-notes", "the team's"))
    response = import_file(mia, body)
    assert response.status_code == 200, response.content
    report = response.json()
    assert [(error["line"], error["error"]) for error in report["errors"]] == [(2, "personal_entry")]
    assert report["keys"] == {"team-notes": "created"}


# --- Hostile names ----------------------------------------------------------------------

HOSTILE_NAMES = {
    "64 KiB after @": "@" + "a" * 65536,
    "64 KiB of @": "@" * 65536,
    "NUL": "@mia\x00:notes",
    "NUL in the owner": "@m\x00ia",
    "unicode owner": "@mïa:notes",
    "right-to-left override": "@\u202emia:notes",
    "64 KiB of emoji": "@mia:" + "\U0001f600" * 16384,
}


@pytest.mark.parametrize("name", HOSTILE_NAMES.values(), ids=HOSTILE_NAMES.keys())
def test_a_hostile_personal_name_is_a_clear_4xx_on_every_write(mia: Agent, name: str) -> None:
    saved = mia.client.post(mia.url("memories/"), {"key": name, "content": "x"}, format="json")
    if len(name) > 200:  # says what is wrong with it
        assert "no more than 200 characters" in saved.content.decode(), saved.content
    assert saved.status_code == 400 and saved.json()["error"] in ("invalid", "invalid_characters"), (
        saved.content
    )
    batch = mia.client.post(
        mia.url("memories/batch/"),
        {"entries": [{"key": name, "content": "x"}, {"key": "@mia:fine", "content": "fine"}]},
        format="json",
    )
    if "\x00" in name:  # refused whole by the API's JSON parser
        assert batch.status_code == 400 and batch.json()["error"] == "invalid_characters", batch.content
    else:
        assert batch.status_code == 200, batch.content
        assert [r["status"] for r in batch.json()["results"]] == ["error", "created"], batch.content
    if "\x00" not in name:  # a NUL cannot travel in a URL's path
        fact = mia.client.put(mia.url(f"facts/{name}/editor/"), {"value": "vim"}, format="json")
        assert fact.status_code == 400 and fact.json()["error"] == "invalid", fact.content
    imported = import_file(
        mia, export_lines(memory_line(name, "x"), fact_line(name, "x"), memory_line("@mia:kept", "kept"))
    )
    assert imported.status_code == 200, imported.content
    refused = "invalid_characters" if "\x00" in name else "invalid"
    assert [(e["line"], e["error"]) for e in imported.json()["errors"]] == [(2, refused), (3, refused)]
    assert imported.json()["keys"] == {"@mia:kept": "created"}


@pytest.mark.parametrize("name", HOSTILE_NAMES.values(), ids=HOSTILE_NAMES.keys())
def test_an_operators_write_of_a_hostile_name_is_a_4xx_and_asks_the_database_nothing(
    team: Team, name: str
) -> None:
    with team_scope(team.id):
        with pytest.raises(InvalidInput):
            writes.save_memory(team=team, key=name, content="x", updated_by="manage.py")
        with pytest.raises(InvalidInput):
            set_fact(team=team, entity=name, key="editor", value="x", actor="manage.py")
        owner = personal_owner_name(name)
        if owner is not None and is_key(owner):
            return  # a member's name could follow: check_key above is what refuses it
        # The check itself, on an owner no key could name: refused, and no query sends the
        # name to the database (a NUL there would be a DataError).
        personal = PersonalNames(team.id)
        personal.check(["team-notes"], field="key")

        def check() -> None:
            with pytest.raises(PersonalNameRefused) as refused:
                personal.expect([name])
                personal.check([name], field="key")
            assert len(refused.value.detail) < 200  # the name is not echoed whole

        assert queries_naming(MEMBERSHIPS, check) == 0


SIZE = 64 * 1024


def key_field_refuses(text: str) -> None:
    """The API's key field (memories.inputs.key_field), as a save's body meets it."""
    with pytest.raises(serializers.ValidationError):
        key_field().run_validation(text)


@pytest.mark.parametrize(
    "work",
    [personal_owner_name, is_key, key_field_refuses],
    ids=["personal_owner_name", "is_key", "key_field"],
)
@pytest.mark.parametrize(
    "shape",
    [lambda n: "@" + "a" * n, lambda n: "@" * n, lambda n: "@" + "a:" * (n // 2), lambda n: "@" + "ï" * n],
    ids=["@aaa", "@@@", "@a:a:", "@unicode"],
)
def test_reading_a_personal_name_takes_linear_time(
    work: Callable[[str], object], shape: Callable[[int], str]
) -> None:
    assert_linear_time(work, shape, SIZE)


def test_refusing_a_hostile_name_as_an_operator_takes_linear_time(team: Team) -> None:
    with team_scope(team.id):
        personal = PersonalNames(team.id)

        def refuse(name: str) -> None:
            try:
                personal.check([name], field="key")
            except PersonalNameRefused:
                return
            raise AssertionError("not refused")

        assert_linear_time(refuse, lambda n: "@" + "a" * n, SIZE)
