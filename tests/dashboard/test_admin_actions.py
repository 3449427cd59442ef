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
from teams import services as team_services
from teams.models import AgentToken, AuditEvent, Team, VaultEntry
from teams.scope import team_scope
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
    save(team, "a", "Alpha note, v2.", reason="newer")
    save(other_team, "b", "Bravo note.")
    for owner in (team, other_team):
        with team_scope(owner.id):
            team_services.set_vault_entry(
                team=owner, key="db", value="db-secret-4711", is_secret=True, actor="t"
            )
        team_services.create_token(team=owner, name="bot", scopes=["read"], actor="t")

    confirm = run_action(admin_client, "shutdown_teams", [team])

    assert confirm.status_code == 200
    body = confirm.content.decode()
    assert "cannot be undone" in body and 'name="post" value="yes"' in body
    # The team and what it holds: 1 active memory, 2 versions. Bravo is not offered.
    assert "<td>alpha</td><td>Alpha</td><td>1</td><td>2</td>" in body and "bravo" not in body
    assert f'name="_selected_action" value="{team.pk}"' in body
    with operator_view():
        assert Team.objects.filter(pk=team.pk).exists()
        assert Memory.objects.filter(team=team).count() == 2

    done = run_action(admin_client, "shutdown_teams", [team], post="yes")

    assert done.status_code == 200
    assert "Team alpha shut down (2 memories deleted)." in done.content.decode()
    with operator_view():
        assert not Team.objects.filter(pk=team.pk).exists()
        for model in (Memory, VaultEntry, AgentToken):
            assert not model.objects.filter(team_id=team.id).exists(), model
        # The audit trail outlives the team; its shutdown is the last event.
        trail = list(AuditEvent.objects.filter(team_id=team.id).order_by("id").values_list("actor", "action"))
        assert trail[-1] == ("admin:operator", "team.shutdown")
        assert sorted(action for _, action in trail[:-1]) == ["token.create", "vault.set"]
        assert list(Memory.objects.filter(team=other_team).values_list("key", "content")) == [
            ("b", "Bravo note.")
        ]
        assert VaultEntry.objects.filter(team=other_team, key="db").exists()
        assert AgentToken.objects.filter(team=other_team, name="bot", revoked_at__isnull=True).exists()


def test_reindex_action_asks_first_then_enqueues_after_commit(
    admin_client: Client, team: Team, django_capture_on_commit_callbacks: Any
) -> None:
    save(team, "a", "Alpha note.")

    confirm = run_action(admin_client, "reindex_teams", [team])
    assert confirm.status_code == 200
    page = confirm.content.decode()
    assert "Yes, re-index" in page and "<td>alpha</td><td>Alpha</td><td>1</td><td>1</td>" in page
    with operator_view():
        assert not AuditEvent.objects.filter(action="team.reindex").exists()  # asking is not doing

    with (
        mock.patch("search.tasks.reindex_team.apply_async") as reindex,
        django_capture_on_commit_callbacks(execute=True),
    ):
        done = run_action(admin_client, "reindex_teams", [team], post="yes")

    assert "Re-index of alpha queued (1 memories)." in done.content.decode()
    reindex.assert_called_once_with((team.id,), retry=False)
    with operator_view():
        events = list(
            AuditEvent.objects.filter(action="team.reindex").values_list("team_id", "actor", "target")
        )
    assert events == [(team.id, "admin:operator", "all: 1")]


def test_staff_without_delete_permission_cannot_shut_teams_down(django_user_model: Any, team: Team) -> None:
    from django.contrib.auth.models import Permission

    staff = django_user_model.objects.create_user("helper", password="pw", is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(codename__in=["view_team", "change_team"]))

    save(team, "a", "Alpha note.")

    response = run_action(client_for(staff), "shutdown_teams", [team], post="yes")

    # The action is not offered to them, so the admin treats it as no action at all.
    assert response.status_code == 200
    body = response.content.decode()
    assert "No action selected." in body and "shut down" not in body
    with operator_view():
        assert Team.objects.filter(pk=team.pk).exists()
        assert list(Memory.objects.filter(team=team).values_list("key", "is_active")) == [("a", True)]
        assert not AuditEvent.objects.exists()


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


def test_audit_events_are_read_only_in_the_admin(admin_client: Client, team: Team) -> None:
    with team_scope(team.id):
        team_services.set_vault_entry(team=team, key="db-url", value="v", is_secret=False, actor="olivia")
    with operator_view():
        event = AuditEvent.objects.get()
    change_url = reverse("admin:teams_auditevent_change", args=[event.pk])

    listing = admin_client.get(reverse("admin:teams_auditevent_changelist"))
    shown = admin_client.get(change_url)
    edited = admin_client.post(change_url, {"actor": "mallory", "action": "vault.set", "target": "x"})
    deleted = admin_client.post(reverse("admin:teams_auditevent_delete", args=[event.pk]), {"post": "yes"})
    added = admin_client.get(reverse("admin:teams_auditevent_add"))

    page = listing.content.decode()
    assert listing.status_code == 200
    assert "olivia" in page and "vault.set" in page and "db-url" in page
    assert reverse("admin:teams_auditevent_add") not in page
    detail = shown.content.decode()
    assert shown.status_code == 200 and "olivia" in detail
    assert (
        'name="_save"' not in detail
        and reverse("admin:teams_auditevent_delete", args=[event.pk]) not in detail
    )
    for refused in (edited, deleted, added):
        assert refused.status_code == 403
        assert refused.json() == {"error": "forbidden", "detail": "forbidden"}
    with operator_view():
        assert list(AuditEvent.objects.values_list("pk", "actor", "action", "target")) == [
            (event.pk, "olivia", "vault.set", "db-url")
        ]
