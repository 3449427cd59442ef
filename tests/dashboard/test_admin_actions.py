"""Operator admin additions: re-index and shutdown actions behind a confirmation page,
and the supersede audit reachable from every team and every memory."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import AbstractUser
from django.test import Client
from django.urls import reverse

from memories.models import Memory
from teams.models import AuditEvent, Team
from tests.conftest import operator_view
from tests.dashboard.conftest import client_for, save


@pytest.fixture
def operator(django_user_model: Any) -> AbstractUser:
    return django_user_model.objects.create_superuser("operator", "op@example.com", "pw")


@pytest.fixture
def admin_client(operator: AbstractUser) -> Client:
    return client_for(operator)


def run_action(client: Client, action: str, teams: list[Team], **extra: str) -> Any:
    return client.post(
        reverse("admin:teams_team_changelist"),
        {"action": action, "_selected_action": [t.pk for t in teams], "index": 0, **extra},
        follow=bool(extra),
    )


def test_shutdown_action_asks_first_then_deletes_only_the_selected_team(
    admin_client: Client, team: Team, other_team: Team
) -> None:
    save(team, "a", "Alpha note.")
    save(other_team, "b", "Bravo note.")

    confirm = run_action(admin_client, "shutdown_teams", [team])

    assert confirm.status_code == 200
    body = confirm.content.decode()
    assert "cannot be undone" in body and "alpha" in body and 'name="post" value="yes"' in body
    with operator_view():
        assert Team.objects.filter(pk=team.pk).exists()

    done = run_action(admin_client, "shutdown_teams", [team], post="yes")

    assert "Team alpha shut down (1 memories deleted)." in done.content.decode()
    with operator_view():
        assert not Team.objects.filter(pk=team.pk).exists()
        assert not Memory.objects.filter(team_id=team.id).exists()
        assert Memory.objects.filter(team=other_team).count() == 1


def test_reindex_action_asks_first_then_enqueues_after_commit(
    admin_client: Client, team: Team, django_capture_on_commit_callbacks: Any
) -> None:
    save(team, "a", "Alpha note.")

    confirm = run_action(admin_client, "reindex_teams", [team])
    assert confirm.status_code == 200 and "Yes, re-index" in confirm.content.decode()

    with (
        mock.patch("search.tasks.reindex_team.apply_async") as reindex,
        django_capture_on_commit_callbacks(execute=True),
    ):
        done = run_action(admin_client, "reindex_teams", [team], post="yes")

    assert "Re-index of alpha queued (1 memories)." in done.content.decode()
    reindex.assert_called_once_with((team.id,), retry=False)
    with operator_view():
        assert AuditEvent.objects.filter(team=team, action="team.reindex", actor="admin:operator").exists()


def test_staff_without_delete_permission_cannot_shut_teams_down(django_user_model: Any, team: Team) -> None:
    from django.contrib.auth.models import Permission

    staff = django_user_model.objects.create_user("helper", password="pw", is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(codename__in=["view_team", "change_team"]))

    response = run_action(client_for(staff), "shutdown_teams", [team], post="yes")

    assert response.status_code == 200
    with operator_view():
        assert Team.objects.filter(pk=team.pk).exists()


def test_team_changelist_links_to_the_team_audit_which_links_to_each_key(
    admin_client: Client, team: Team, other_team: Team
) -> None:
    save(team, "deploy", "Old.")
    save(team, "deploy", "New.", reason="pipeline replaced the script")
    save(other_team, "secret-plan", "Bravo only.")
    save(other_team, "secret-plan", "Bravo only, v2.", reason="bravo reason")

    listing = admin_client.get(reverse("admin:teams_team_changelist")).content.decode()
    team_audit_url = reverse("admin:memories_memory_team_audit", args=[team.id])
    assert team_audit_url in listing

    page = admin_client.get(team_audit_url)
    body = page.content.decode()
    assert page.status_code == 200
    assert "pipeline replaced the script" in body
    assert reverse("admin:memories_memory_audit", args=[team.id, "deploy"]) in body
    assert "bravo reason" not in body and "secret-plan" not in body
    assert admin_client.get(reverse("admin:memories_memory_team_audit", args=[999999])).status_code == 404


def test_dashboard_links_staff_to_the_admin_audit(django_user_model: Any, team: Team) -> None:
    from tests.dashboard.conftest import join

    staff = django_user_model.objects.create_user("ops", password="pw", is_staff=True)
    join(team, staff, "viewer")
    save(team, "deploy", "Old.")
    client = client_for(staff)

    overview = client.get(reverse("dashboard:overview", args=["alpha"])).content.decode()
    detail = client.get(reverse("dashboard:memory", args=["alpha", "deploy"])).content.decode()

    assert reverse("admin:memories_memory_team_audit", args=[team.id]) in overview
    assert reverse("admin:memories_memory_audit", args=[team.id, "deploy"]) in detail


def test_audit_events_are_read_only_in_the_admin(admin_client: Client) -> None:
    assert admin_client.get(reverse("admin:teams_auditevent_changelist")).status_code == 200
    assert admin_client.get(reverse("admin:teams_auditevent_add")).status_code == 403
