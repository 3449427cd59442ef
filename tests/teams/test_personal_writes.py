"""The write side of personal entries (memories.personal.PersonalNames): who writes is read
once per batch or import, not once per entry. Who sees what:
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

from memories.facts.models import Fact
from memories.models import Memory
from teams.models import Membership, Team
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
