"""The write side of personal entries (memories.personal.PersonalNames): who writes is read
once per batch or import, not once per entry; the team's own jobs and commands (viewer
`*`) get a clean `personal_entry` error, never the database trigger's, for a name whose
owner is no member. Who sees what:
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

from memories import writes
from memories.facts.models import Fact
from memories.facts.services import set_fact
from memories.models import Memory
from memories.personal import PersonalNameRefused
from memories.writes.batch import BatchEntry
from teams import memberships
from teams.models import Membership, Team
from teams.scope import team_scope
from tests.conftest import Agent, operator_view
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
