"""The conversations API: store (scrubbed, bounded, within the quota), list newest first,
read with line slicing, delete; retention; and the outsider on every route."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from django.test import override_settings

from memories.conversations import services
from memories.conversations.models import MAX_LINES, MAX_TRANSCRIPT_CHARS, Conversation, ConversationLine
from search.conversation_index import index_conversation, stuck_conversations
from search.models import ConversationChunk
from teams.models import Team
from teams.scope import team_scope
from teams.services import set_vault_entry
from tests.conftest import Agent, operator_view

pytestmark = pytest.mark.django_db

AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLQ"


def store(agent: Agent, lines: list[dict[str, str]], capture: Any = None, **extra: Any) -> Any:
    return agent.client.post(agent.url("conversations/"), {"lines": lines, **extra}, format="json")


def talk(count: int) -> list[dict[str, str]]:
    return [
        {"role": "user" if n % 2 == 0 else "assistant", "text": f"line {n + 1} about the deploy"}
        for n in range(count)
    ]


def test_a_conversation_is_stored_scrubbed_and_read_back_in_order(member: Agent) -> None:
    lines = [
        {"role": "user", "text": f"the key is {AWS_KEY}, deploy with it"},
        {"role": "assistant", "text": "Noted; deploying to staging."},
    ]
    response = store(member, lines, session="s-1", title="Deploy", source="hook")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["session"], body["title"], body["source"], body["line_count"]) == (
        "s-1",
        "Deploy",
        "hook",
        2,
    )
    assert body["created_by"] == "writer-bot"
    assert body["redactions"] and AWS_KEY not in response.content.decode()
    read = member.client.get(member.url(f"conversations/{body['id']}/"))
    assert read.status_code == 200
    got = read.json()
    assert [line["number"] for line in got["lines"]] == [1, 2]
    assert got["lines"][1] == {"number": 2, "role": "assistant", "text": "Noted; deploying to staging."}
    assert "deploy with it" in got["lines"][0]["text"]
    with operator_view():
        stored = " ".join(ConversationLine.objects.values_list("text", flat=True))
    assert AWS_KEY not in stored


def test_the_teams_vault_secrets_are_never_stored(team: Team, member: Agent) -> None:
    with team_scope(team.id):
        set_vault_entry(
            team=team, key="db", value="correct-horse-battery-staple-42", is_secret=True, actor="t"
        )
    response = store(member, [{"role": "user", "text": "the db password is correct-horse-battery-staple-42"}])
    assert response.status_code == 201
    with operator_view():
        assert "correct-horse" not in ConversationLine.objects.get().text


def test_lines_slice_with_a_range(member: Agent) -> None:
    conversation_id = store(member, talk(10)).json()["id"]
    got = member.client.get(member.url(f"conversations/{conversation_id}/"), {"lines": "3-5"}).json()
    assert [line["number"] for line in got["lines"]] == [3, 4, 5]
    assert (got["from_line"], got["to_line"], got["has_more"]) == (3, 5, True)
    tail = member.client.get(member.url(f"conversations/{conversation_id}/"), {"lines": "9-"}).json()
    assert [line["number"] for line in tail["lines"]] == [9, 10] and tail["has_more"] is False


@pytest.mark.parametrize("bad", ["5-3", "0-2", "a-b", "1-2-3", "-4"])
def test_a_bad_line_range_is_400(member: Agent, bad: str) -> None:
    conversation_id = store(member, talk(3)).json()["id"]
    response = member.client.get(member.url(f"conversations/{conversation_id}/"), {"lines": bad})
    assert response.status_code == 400
    assert response.json()["error"]


def test_the_list_is_newest_first_and_paginated(member: Agent) -> None:
    ids = [store(member, talk(2), title=f"c{n}").json()["id"] for n in range(3)]
    page = member.client.get(member.url("conversations/"), {"limit": 2}).json()
    assert [row["id"] for row in page["results"]] == [ids[2], ids[1]]
    assert "lines" not in page["results"][0]
    rest = member.client.get(page["next"]).json()
    assert [row["id"] for row in rest["results"]] == [ids[0]]


def test_delete_removes_the_conversation_its_lines_and_chunks(
    member: Agent, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        conversation_id = store(member, talk(4)).json()["id"]
    with operator_view():
        assert ConversationChunk.objects.count() >= 1
    assert member.client.delete(member.url(f"conversations/{conversation_id}/")).status_code == 204
    assert member.client.get(member.url(f"conversations/{conversation_id}/")).status_code == 404
    with operator_view():
        assert (
            Conversation.objects.count(),
            ConversationLine.objects.count(),
            ConversationChunk.objects.count(),
        ) == (0, 0, 0)


def test_a_read_only_token_may_read_but_not_store_or_delete(member: Agent, readonly_member: Agent) -> None:
    conversation_id = store(member, talk(2)).json()["id"]
    assert store(readonly_member, talk(2)).status_code == 403
    assert (
        readonly_member.client.delete(readonly_member.url(f"conversations/{conversation_id}/")).status_code
        == 403
    )
    assert (
        readonly_member.client.get(readonly_member.url(f"conversations/{conversation_id}/")).status_code
        == 200
    )


@pytest.mark.parametrize(
    "body",
    [
        {"lines": []},
        {"lines": "user: hi"},
        {"lines": [{"role": "User", "text": "hi"}]},
        {"lines": [{"role": "user"}]},
        {"lines": [{"role": "user", "text": 5}]},
        {"lines": [{"role": "user", "text": "a\x00b"}]},
        {"lines": [{"role": "user", "text": "hi", "extra": 1}]},
        {"lines": [{"role": "user", "text": "hi"}], "source": "mail"},
        {"lines": [{"role": "user", "text": "hi"}], "ended_at": "2026-01-01T00:00:00"},
        {
            "lines": [{"role": "user", "text": "hi"}],
            "started_at": "2026-01-02T00:00:00Z",
            "ended_at": "2026-01-01T00:00:00Z",
        },
    ],
)
def test_bad_input_is_a_400_in_the_one_error_shape(member: Agent, body: dict[str, Any]) -> None:
    response = member.client.post(member.url("conversations/"), body, format="json")
    assert response.status_code == 400, response.content
    assert set(response.json()) >= {"error", "detail"}
    with operator_view():
        assert Conversation.objects.count() == 0


def test_too_many_lines_or_characters_is_413(member: Agent) -> None:
    many = [{"role": "user", "text": "x"}] * (MAX_LINES + 1)
    response = member.client.post(member.url("conversations/"), {"lines": many}, format="json")
    assert response.status_code == 413 and response.json()["error"] == "transcript_too_large"
    big = [{"role": "user", "text": "word " * (MAX_TRANSCRIPT_CHARS // 10)}] * 3
    response = member.client.post(member.url("conversations/"), {"lines": big}, format="json")
    assert response.status_code in (413,) and response.json()["error"] in (
        "transcript_too_large",
        "body_too_large",
    )


def test_the_team_quota_of_conversations_is_a_409(member: Agent) -> None:
    with override_settings(MEMORYHUB_QUOTA_CONVERSATIONS=2):
        assert store(member, talk(1)).status_code == 201
        assert store(member, talk(1)).status_code == 201
        refused = store(member, talk(1))
    assert refused.status_code == 409
    assert (refused.json()["error"], refused.json()["quota"]) == ("quota_exceeded", "conversations")


def test_an_outsider_gets_404_on_every_route_and_no_byte_of_the_team(member: Agent, outsider: Agent) -> None:
    secret_title = "alpha-private-deploy-plan"
    conversation_id = store(
        member, [{"role": "user", "text": "alpha-only words"}], title=secret_title
    ).json()["id"]
    for response in (
        outsider.client.get(outsider.url(f"conversations/{conversation_id}/")),
        outsider.client.delete(outsider.url(f"conversations/{conversation_id}/")),
        outsider.client.get(outsider.url("conversations/", team="alpha")),
        outsider.client.post(outsider.url("conversations/", team="alpha"), {"lines": talk(1)}, format="json"),
        outsider.client.get(outsider.url(f"conversations/{conversation_id}/", team="alpha")),
        outsider.client.delete(outsider.url(f"conversations/{conversation_id}/", team="alpha")),
    ):
        assert response.status_code == 404, response.content
        assert secret_title.encode() not in response.content and b"alpha-only" not in response.content
    own_list = outsider.client.get(outsider.url("conversations/")).json()
    assert own_list["results"] == []
    assert member.client.get(member.url(f"conversations/{conversation_id}/")).status_code == 200


def test_retention_deletes_expired_conversations_bounded_and_per_team(team: Team, other_team: Team) -> None:
    old = dt.datetime.now(dt.UTC) - dt.timedelta(days=40)
    lines = [services.Line(role="user", text="hello")]
    with team_scope(team.id):
        for _ in range(3):
            services.store_conversation(team=team, lines=lines, actor="t", created_at=old)
        services.store_conversation(team=team, lines=lines, actor="t")
    other_team.conversation_retention_days = 60
    other_team.save()
    with team_scope(other_team.id):
        kept = services.store_conversation(team=other_team, lines=lines, actor="t", created_at=old)
    first = services.delete_expired_everywhere(budget=2)
    assert first.deleted == 2 and first.errors == 0
    second = services.delete_expired_everywhere(start_after_team=first.resume_after_team, budget=2)
    assert second.deleted == 1
    with operator_view():
        assert Conversation.objects.filter(team=team).count() == 1
        assert Conversation.objects.filter(id=kept.id).exists()


def test_one_teams_failure_never_stops_the_retention_of_the_others(team: Team, other_team: Team) -> None:
    old = dt.datetime.now(dt.UTC) - dt.timedelta(days=40)
    lines = [services.Line(role="user", text="hello")]
    with team_scope(other_team.id):
        services.store_conversation(team=other_team, lines=lines, actor="t", created_at=old)
    # A retention the database refuses: the team's pass fails, the next team's goes on.
    Team.objects.filter(id=team.id).update(conversation_retention_days=10**9)
    run = services.delete_expired_everywhere(budget=10)
    assert run.errors == 1 and run.deleted == 1


def test_the_retention_task_records_its_run(team: Team) -> None:
    from memories import tasks
    from teams.models import JobRun

    assert tasks.delete_expired_conversations()["errors"] == 0
    assert JobRun.objects.filter(job=tasks.RETENTION_JOB, succeeded=True).exists()


def test_the_retention_setting_is_a_team_setting(team: Team) -> None:
    from core.errors import InvalidInput
    from teams.team_settings import update_team_settings

    with team_scope(team.id):
        changed = update_team_settings(team=team, changes={"conversation_retention_days": 7}, by="owner")
        assert changed == {"conversation_retention_days": (30, 7)}
        with pytest.raises(InvalidInput):
            update_team_settings(team=team, changes={"conversation_retention_days": 0}, by="owner")


def test_the_body_is_json(member: Agent) -> None:
    response = member.client.post(
        member.url("conversations/"), json.dumps({"lines": talk(1)}), content_type="application/json"
    )
    assert response.status_code == 201


def test_the_retention_job_is_in_beats_schedule_and_known_to_the_worker() -> None:
    import importlib

    from django.apps import apps
    from django_celery_beat.models import PeriodicTask

    from memoryhub.celery import app as celery_app

    migration = importlib.import_module("memories.migrations.0019_conversation_retention_job")
    name, task, every, period = migration.RETENTION_JOB
    celery_app.loader.import_default_modules()
    assert task in celery_app.tasks
    # The migration's rows are gone once a transactional test ran before this one
    # (its flush empties every table): the migration's own function makes them again.
    PeriodicTask.objects.filter(name=name).delete()
    migration.create_job(apps, None)
    migration.create_job(apps, None)
    job = PeriodicTask.objects.get(name=name)
    assert (job.task, job.interval.every, job.interval.period) == (task, every, period)


def test_a_conversation_left_pending_is_found_by_the_reconcile_job_until_indexed(
    member: Agent, django_capture_on_commit_callbacks: Any
) -> None:
    """Its indexing message lost (the broker refused it, or the worker died with it): the
    reconcile job enqueues it again; once indexed, it is left alone."""
    with django_capture_on_commit_callbacks(execute=False):  # stored, never enqueued
        stored = store(member, talk(3))
    conversation_id = stored.json()["id"]
    assert [str(c) for _, c in stuck_conversations(older_than_seconds=0, limit=10)] == [conversation_id]
    assert stuck_conversations(older_than_seconds=3600, limit=10) == []  # not before its grace

    assert index_conversation(team_id=member.team.id, conversation_id=conversation_id) in {
        "indexed",
        "keyword",
    }
    assert stuck_conversations(older_than_seconds=0, limit=10) == []
