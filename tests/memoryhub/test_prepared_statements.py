"""The hot reads' statements are prepared per connection (core.prepared_statements):
the answers are those Django's raw querysets and client-side binding gave, each
statement is logged with its values, row-level security holds for a plan made in
another team's scope, and a statement is planned once per connection once it is hot."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.db.models import signals
from django.test.utils import CaptureQueriesContext

from core.prepared_statements import model_instances
from memories.models import Memory
from teams.scope import team_scope
from tests.conftest import Agent

pytestmark = pytest.mark.django_db

ENTRY_READ_MARK = "counted AS ("  # a fragment only the entry's read (memories.entry_read) has


def _prepared(fragment: str) -> list[tuple[int, int]]:
    """(generic plans, custom plans) of each statement this connection prepared whose
    text holds `fragment`."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE strpos(statement, %s) > 0",
            [fragment],
        )
        return list(cursor.fetchall())


def test_an_entrys_read_is_prepared_once_hot_and_answers_as_before(member: Agent, save: Any) -> None:
    threshold = settings.DATABASES["default"]["OPTIONS"]["prepare_threshold"]
    assert threshold == 5  # the default (memoryhub/settings.py)
    save(member, "deploy-day", "Deploys happen on Tuesdays.", metadata={"owner": "ops"})
    noted = member.client.post(
        member.url("memories/deploy-day/annotations/"), {"note": "Not in August."}, format="json"
    )
    assert noted.status_code == 201

    answers = []
    for _ in range(threshold):
        answers.append(member.client.get(member.url("memories/deploy-day/")).json())
    assert _prepared(ENTRY_READ_MARK) == []  # sent `threshold` times: prepared on the next
    with CaptureQueriesContext(connection) as captured:
        for _ in range(3):
            answers.append(member.client.get(member.url("memories/deploy-day/")).json())

    [(generic, custom)] = _prepared(ENTRY_READ_MARK)
    assert generic + custom == 3  # prepared once, then only executed
    # Every answer the same entry, its note, and each read counted once.
    assert {(a["content"], a["metadata"]["owner"], a["annotations"][0]["note"]) for a in answers} == {
        ("Deploys happen on Tuesdays.", "ops", "Not in August.")
    }
    counts = [a["access_count"] for a in answers]
    assert counts == list(range(counts[0], counts[0] + len(answers)))
    # Logged with its values in place, as a client-bound statement is.
    [logged] = [q["sql"] for q in captured.captured_queries if ENTRY_READ_MARK in q["sql"]][:1]
    assert "'deploy-day'" in logged and "$1" not in logged


def test_a_plan_made_in_one_teams_scope_reads_nothing_of_it_in_anothers(
    member: Agent, outsider: Agent, save: Any
) -> None:
    save(member, "deploy-day", "Deploys happen on Tuesdays.")
    for _ in range(7):
        assert member.client.get(member.url("memories/deploy-day/")).status_code == 200
    assert _prepared(ENTRY_READ_MARK)
    # The same statement, prepared, in the other team's scope: the URL's team is refused
    # first, and the other team's own URL finds no such key.
    refused = outsider.client.get(member.url("memories/deploy-day/"))
    missing = outsider.client.get(outsider.url("memories/deploy-day/"))
    assert (refused.status_code, missing.status_code) == (404, 404)
    assert b"Tuesdays" not in refused.content + missing.content
    [(generic, custom)] = _prepared(ENTRY_READ_MARK)
    assert generic + custom >= 3  # the outsider's read ran the prepared statement


def test_instances_are_what_a_raw_queryset_builds(member: Agent, save: Any) -> None:
    save(member, "deploy-day", "Deploys happen on Tuesdays.", metadata={"owner": "ops", "n": [1, 2]})
    save(
        member, "skill", "Run the release checklist.", skill_trigger={"name": "release", "keywords": ["ship"]}
    )
    sql = "SELECT *, key || '!' AS shouted FROM memories_memory WHERE team_id = %s ORDER BY key"
    with team_scope(member.team.id):
        expected = list(Memory.objects.raw(sql, [member.team.id]))
        for _ in range(2):  # the column layout worked out once, then reused
            built = model_instances(Memory, sql, [member.team.id])
    assert len(built) == len(expected) == 2
    for mine, django in zip(built, expected, strict=True):
        for field in Memory._meta.concrete_fields:
            assert getattr(mine, field.attname) == getattr(django, field.attname), field.name
        assert vars(mine)["shouted"] == vars(django)["shouted"] == f"{django.key}!"
        assert (mine._state.db, mine._state.adding) == (django._state.db, False)
        assert vars(mine).keys() == vars(django).keys()
    assert built[0].metadata["n"] == [1, 2]  # JSON decoded, as Django does
    assert built[0].team.slug == member.team.slug  # a relation still loads


def test_a_row_of_some_columns_leaves_the_others_deferred_as_django_does(member: Agent, save: Any) -> None:
    save(member, "deploy-day", "Deploys happen on Tuesdays.")
    sql = "SELECT id, key FROM memories_memory WHERE team_id = %s"
    with team_scope(member.team.id):
        [expected] = Memory.objects.raw(sql, [member.team.id])
        [built] = model_instances(Memory, sql, [member.team.id])
        assert built.get_deferred_fields() == expected.get_deferred_fields()
        assert "content" in built.get_deferred_fields()
        assert built.content == "Deploys happen on Tuesdays."  # loaded on demand


def test_init_signals_are_sent_for_every_instance(member: Agent, save: Any) -> None:
    save(member, "deploy-day", "Deploys happen on Tuesdays.")
    save(member, "review-day", "Reviews happen on Mondays.")
    seen: list[str] = []

    def note(sender: type, instance: Memory, **kwargs: Any) -> None:
        seen.append(instance.key)

    sql = "SELECT * FROM memories_memory WHERE team_id = %s ORDER BY key"
    signals.post_init.connect(note, sender=Memory)
    try:
        with team_scope(member.team.id):
            built = model_instances(Memory, sql, [member.team.id])
    finally:
        signals.post_init.disconnect(note, sender=Memory)
    assert seen == [memory.key for memory in built] == ["deploy-day", "review-day"]


def test_a_statement_without_the_primary_key_is_refused(member: Agent, save: Any) -> None:
    save(member, "deploy-day", "Deploys happen on Tuesdays.")
    with team_scope(member.team.id), pytest.raises(ValueError, match="primary key"):
        model_instances(Memory, "SELECT key FROM memories_memory WHERE team_id = %s", [member.team.id])


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-29 08:00:00.123456+00",
        "2026-11-29 08:00:00+00",
        "2026-11-29 08:00:00.1+00",
        "2026-11-29 09:00:00+01",  # another offset: Django's own parser
        "infinity",
        "-infinity",
        "0099-01-01 00:00:00+00 BC",
        "12026-11-29 08:00:00+00",
    ],
)
def test_a_utc_timestamp_is_read_as_djangos_loader_reads_it(text: str) -> None:
    from django.db.backends.postgresql.psycopg_any import BaseTzLoader

    from core.postgres_backend.base import UtcTimestamptzLoader

    class DjangosUtcLoader(BaseTzLoader):
        timezone = UtcTimestamptzLoader.timezone

    def read(loader: type[BaseTzLoader]) -> Any:
        try:
            return loader(0, connection.connection).load(text.encode())
        except Exception as error:  # the same refusal is the same answer
            return type(error)

    assert read(UtcTimestamptzLoader) == read(DjangosUtcLoader)
    if isinstance(read(UtcTimestamptzLoader), datetime.datetime):
        assert read(UtcTimestamptzLoader).tzinfo is datetime.UTC


def test_every_connection_reads_timestamps_with_the_utc_loader(member: Agent, save: Any) -> None:
    from core.postgres_backend.base import UtcTimestamptzLoader

    connection.ensure_connection()
    loader = connection.connection.adapters.get_loader(1184, 0)  # timestamptz, text
    assert loader is UtcTimestamptzLoader
    saved = save(member, "deploy-day", "Deploys happen on Tuesdays.")
    with team_scope(member.team.id):
        read = Memory.objects.get(key="deploy-day")
    assert read.created_at.tzinfo is datetime.UTC
    assert read.created_at.isoformat().replace("+00:00", "Z") == saved["created_at"]


@pytest.mark.django_db
def test_the_adapters_with_the_utc_loader_are_made_once_and_copied_by_each_connection() -> None:
    first, again = connection.get_connection_params(), connection.get_connection_params()

    assert first["context"] is again["context"]
    connection.ensure_connection()
    assert connection.connection.adapters is not first["context"]
