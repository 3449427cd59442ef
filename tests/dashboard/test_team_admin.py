"""Vault, tokens, members, re-index, audit log and shutdown pages."""

from __future__ import annotations

import logging
from typing import Any
from unittest import mock

import pytest
from django.test import Client
from django.urls import reverse

from memories.models import Memory
from teams.models import AgentToken, AuditEvent, Membership, Team, VaultEntry
from teams.scope import team_scope
from teams.selectors import reveal_vault_value
from tests.conftest import operator_view
from tests.dashboard.conftest import Cast, save

SECRET = "hunter2-correct-horse"


def url(name: str, **kwargs: Any) -> str:
    return reverse(f"dashboard:{name}", kwargs={"slug": "alpha", **kwargs})


@pytest.fixture
def adam(cast: Cast) -> Client:
    return cast.client("admin")


@pytest.fixture
def vault(team: Team, cast: Cast) -> None:
    from teams import services as team_services

    with team_scope(team.id):
        team_services.set_vault_entry(team=team, key="db-password", value=SECRET, is_secret=True, actor="x")
        team_services.set_vault_entry(team=team, key="region", value="eu-west-1", is_secret=False, actor="x")


def events(team: Team) -> list[tuple[str, str, str]]:
    """What the people of these tests did (the fixtures' set-up acts as "x")."""
    with operator_view():
        rows = AuditEvent.objects.filter(team=team).exclude(actor="x").order_by("id")
        return [(e.actor, e.action, e.target) for e in rows]


# --- vault --------------------------------------------------------------------------------


@pytest.mark.usefixtures("vault")
@pytest.mark.parametrize("role", ["viewer", "member", "admin", "owner"])
def test_vault_page_masks_secrets_and_shows_plain_values(cast: Cast, role: str) -> None:
    response = cast.client(role).get(url("vault"))

    body = response.content.decode()
    assert response.status_code == 200
    assert "db-password" in body and "••••••••" in body
    assert SECRET not in body
    assert "eu-west-1" in body
    assert ("Reveal" in body) is (role in ("admin", "owner"))


@pytest.mark.usefixtures("vault")
def test_admin_reveals_a_secret_and_the_reveal_is_audited(
    adam: Client, team: Team, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="memoryhub.audit"):
        response = adam.post(url("vault_reveal", key="db-password"))

    assert response.status_code == 200
    assert SECRET in response.content.decode()
    assert "no-store" in response["Cache-Control"]
    assert events(team) == [("user:adam", "vault.reveal", "db-password")]
    assert any("vault.reveal db-password" in r.getMessage() for r in caplog.records)
    assert all(SECRET not in r.getMessage() for r in caplog.records)


@pytest.mark.usefixtures("vault")
def test_reveal_is_post_only(adam: Client, team: Team) -> None:
    assert adam.get(url("vault_reveal", key="db-password")).status_code == 405
    assert events(team) == []


@pytest.mark.usefixtures("vault")
def test_reveal_of_an_unknown_key_is_404(adam: Client) -> None:
    assert adam.post(url("vault_reveal", key="nope")).status_code == 404


def test_admin_sets_rotates_and_deletes_vault_entries(adam: Client, team: Team) -> None:
    created = adam.post(url("vault"), {"key": "api-token", "value": "first-value-123", "is_secret": "on"})
    rotated = adam.post(url("vault_rotate", key="api-token"), {"value": "second-value-456"})

    assert created.status_code == 302 and rotated.status_code == 302
    with operator_view():
        entry = VaultEntry.objects.get(team=team, key="api-token")
        assert entry.is_secret and entry.value == ""
        assert reveal_vault_value(entry) == "second-value-456"
        assert entry.updated_by == "user:adam"

    assert adam.post(url("vault_delete", key="api-token")).status_code == 302
    with operator_view():
        assert not VaultEntry.objects.filter(team=team, key="api-token").exists()
    assert [action for _, action, _ in events(team)] == ["vault.set", "vault.set", "vault.delete"]


@pytest.mark.usefixtures("vault")
def test_setting_an_existing_key_points_to_rotate_and_never_echoes_the_secret(adam: Client) -> None:
    response = adam.post(url("vault"), {"key": "db-password", "value": "typed-secret-999", "is_secret": "on"})

    body = response.content.decode()
    assert response.status_code == 400
    assert "already set; use Rotate" in body
    assert "typed-secret-999" not in body


def test_a_weak_secret_is_refused_on_the_value_field_and_the_page_stays_whole(
    adam: Client, team: Team
) -> None:
    response = adam.post(url("vault"), {"key": "trap", "value": "csrfmiddlewaretoken", "is_secret": "on"})

    body = response.content.decode()
    assert response.status_code == 400
    assert "too common to be a secret" in body
    assert 'name="csrfmiddlewaretoken"' in body  # the form still works
    with operator_view():
        assert not VaultEntry.objects.filter(team=team, key="trap").exists()


@pytest.mark.usefixtures("vault")
def test_rotate_form_of_a_secret_starts_empty(adam: Client) -> None:
    response = adam.get(url("vault_rotate", key="db-password"))

    assert response.status_code == 200
    assert SECRET not in response.content.decode()


# --- tokens ---------------------------------------------------------------------------------


def test_created_token_is_shown_once_and_only_its_hash_is_kept(adam: Client, team: Team) -> None:
    response = adam.post(url("tokens"), {"name": "ci-runner", "scopes": ["read", "write"]})

    assert response.status_code == 201
    raw = response.context["issued"].raw
    assert raw in response.content.decode()
    assert "no-store" in response["Cache-Control"]
    with operator_view():
        token = AgentToken.objects.get(team=team, name="ci-runner")
    assert token.token_hash == AgentToken.hash_token(raw)
    assert token.scopes == ["read", "write"]
    listing = adam.get(url("tokens")).content.decode()
    assert raw not in listing and "ci-runner" in listing and token.prefix in listing


def test_revoke_a_token_after_confirming(adam: Client, team: Team) -> None:
    from teams import services as team_services

    token = team_services.create_token(team=team, name="old-bot", scopes=["read"], actor="test").token

    confirm = adam.get(url("token_revoke", token_id=token.pk))
    response = adam.post(url("token_revoke", token_id=token.pk))

    assert confirm.status_code == 200 and "Revoke token" in confirm.content.decode()
    assert response.status_code == 302
    with operator_view():
        assert AgentToken.objects.get(pk=token.pk).revoked_at is not None
    assert events(team)[-1] == ("user:adam", "token.revoke", "old-bot")
    again = adam.post(url("token_revoke", token_id=token.pk), follow=True)
    assert "already revoked" in again.content.decode()


def test_duplicate_live_token_name_re_renders_the_form_with_the_error(adam: Client, team: Team) -> None:
    from teams import services as team_services

    team_services.create_token(team=team, name="ci-runner", scopes=["read"], actor="test")

    response = adam.post(url("tokens"), {"name": "ci-runner", "scopes": ["read"]})

    body = response.content.decode()
    assert response.status_code == 400
    assert "already has a live token named" in body
    assert 'aria-invalid="true"' in body


# --- sessions ---------------------------------------------------------------------------------


def test_sessions_page_lists_live_sessions_with_their_task(cast: Cast, team: Team) -> None:
    from agents.sessions import boot_session, end_session

    with team_scope(team.id):
        boot_session(team=team, token=None, agent="claude-code", current_task="refactoring the parser")
        ended = boot_session(team=team, token=None, agent="old-agent", current_task="gone").session
        end_session(team=team, session_id=ended.id)

    response = cast.client("viewer").get(url("sessions"))
    body = response.content.decode()

    assert response.status_code == 200
    assert "claude-code" in body and "refactoring the parser" in body
    assert "old-agent" not in body
    partial = cast.client("viewer").get(url("sessions"), headers={"HX-Request": "true"})
    assert "<html" not in partial.content.decode()


# --- members ---------------------------------------------------------------------------------


def test_admin_adds_a_member_and_changes_a_role(adam: Client, team: Team, django_user_model: Any) -> None:
    django_user_model.objects.create_user("newbie", password="pw")

    added = adam.post(url("members"), {"username": "newbie", "role": "viewer"})
    with operator_view():
        membership = Membership.objects.get(team=team, user__username="newbie")
    changed = adam.post(url("member_role", membership_id=membership.pk), {"role": "member"})

    assert added.status_code == 302 and changed.status_code == 302
    with operator_view():
        assert Membership.objects.get(pk=membership.pk).role == "member"
    assert [action for _, action, _ in events(team)] == ["member.add", "member.role"]


def test_adding_an_unknown_user_answers_like_adding_a_known_one(
    adam: Client, team: Team, django_user_model: Any
) -> None:
    """The form must not tell a team admin which usernames have an account."""
    django_user_model.objects.create_user("newbie", password="pw")

    unknown = adam.post(url("members"), {"username": "ghost", "role": "viewer"}, follow=True)
    known = adam.post(url("members"), {"username": "newbie", "role": "viewer"}, follow=True)

    assert unknown.redirect_chain == known.redirect_chain
    assert "no user named" not in unknown.content.decode()
    notices = [
        [str(m).replace(name, "{name}") for m in response.context["messages"]]
        for response, name in ((unknown, "ghost"), (known, "newbie"))
    ]
    assert notices[0] == notices[1]
    with operator_view():
        assert Membership.objects.filter(team=team, user__username="newbie").exists()
        assert not Membership.objects.filter(team=team, user__username="ghost").exists()


def test_admin_cannot_make_owners_or_touch_them(adam: Client, cast: Cast, team: Team) -> None:
    with operator_view():
        owner = Membership.objects.get(team=team, user=cast.owner)
        viewer = Membership.objects.get(team=team, user=cast.viewer)

    promote = adam.post(url("member_role", membership_id=viewer.pk), {"role": "owner"}, follow=True)
    demote = adam.post(url("member_role", membership_id=owner.pk), {"role": "viewer"}, follow=True)
    remove = adam.post(url("member_remove", membership_id=owner.pk), follow=True)

    for response in (promote, demote, remove):
        assert "only an owner can" in response.content.decode()
    with operator_view():
        assert Membership.objects.get(pk=owner.pk).role == "owner"
        assert Membership.objects.get(pk=viewer.pk).role == "viewer"


def test_the_last_owner_cannot_leave_or_be_demoted(cast: Cast, team: Team) -> None:
    olivia = cast.client("owner")
    with operator_view():
        owner = Membership.objects.get(team=team, user=cast.owner)

    demote = olivia.post(url("member_role", membership_id=owner.pk), {"role": "admin"}, follow=True)
    leave = olivia.post(url("member_remove", membership_id=owner.pk), follow=True)

    assert "keeps at least one owner" in demote.content.decode()
    assert "keeps at least one owner" in leave.content.decode()
    with operator_view():
        assert Membership.objects.get(pk=owner.pk).role == "owner"


# --- re-index, audit log, shutdown --------------------------------------------------------------


def test_reindex_button_enqueues_after_commit(
    adam: Client, team: Team, django_capture_on_commit_callbacks: Any
) -> None:
    save(team, "a", "First.")
    save(team, "b", "Second.")

    with (
        mock.patch("search.tasks.reindex_team.apply_async") as reindex,
        mock.patch("search.tasks.index_memory.apply_async") as index,
        django_capture_on_commit_callbacks(execute=True) as callbacks,
    ):
        everything = adam.post(url("reindex"), {"scope": "all"})
        stuck = adam.post(url("reindex"), {"scope": "stuck"})

    assert everything.status_code == 302 and stuck.status_code == 302
    assert len(callbacks) == 3
    reindex.assert_called_once_with((team.id,), retry=False)
    assert index.call_count == 2
    assert [action for _, action, _ in events(team)] == ["team.reindex", "team.reindex"]


def test_audit_log_lists_events_for_admins(adam: Client, team: Team) -> None:
    adam.post(url("vault"), {"key": "k1", "value": "v", "is_secret": ""})

    response = adam.get(url("audit_log"))

    assert response.status_code == 200
    assert "vault.set" in response.content.decode()


def test_owner_shuts_the_team_down_after_typing_its_slug(
    cast: Cast, team: Team, other_team: Team, bravo: Any
) -> None:
    olivia = cast.client("owner")
    save(team, "a", "First.")

    wrong = olivia.post(url("shutdown"), {"confirm": "alpah"})
    assert wrong.status_code == 400
    assert "not this team" in wrong.content.decode()

    response = olivia.post(url("shutdown"), {"confirm": "alpha"})

    assert response.status_code == 302 and response["Location"] == reverse("dashboard:home")
    with operator_view():
        assert not Team.objects.filter(pk=team.pk).exists()
        assert not Memory.objects.filter(team_id=team.id).exists()
        assert Memory.objects.filter(team=other_team).exists()
    assert olivia.get(url("overview")).status_code == 404
