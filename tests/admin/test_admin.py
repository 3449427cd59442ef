"""The operator admin: every team visible, credentials never, memories read-only."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import AbstractUser
from django.test import Client
from django.urls import reverse

from memories import writes
from memories.models import Memory
from teams import services as team_services
from teams.models import AgentToken, Team, VaultEntry
from teams.scope import team_scope
from tests.conftest import operator_view
from tests.factories import MemoryFactory

KEY = "ops:deploy@v1.x_y-z"


@pytest.fixture
def operator(django_user_model: Any) -> AbstractUser:
    return django_user_model.objects.create_superuser("operator", "op@example.com", "pw")


@pytest.fixture
def admin_client(operator: AbstractUser) -> Client:
    client = Client()
    client.force_login(operator)
    return client


def save(team: Team, key: str, content: str, by: str = "agent-a", reason: str | None = None) -> Memory:
    with team_scope(team.id):
        return writes.save_memory(
            team=team, key=key, content=content, updated_by=by, supersede_reason=reason
        ).memory


def delete(team: Team, key: str, by: str) -> Memory:
    with team_scope(team.id):
        return writes.delete_memory(team=team, key=key, deleted_by=by)


def changelist_rows(client: Client, query: str = "") -> set[tuple[str, str, str]]:
    response = client.get(reverse("admin:memories_memory_changelist") + query)
    assert response.status_code == 200
    return {(m.team.slug, m.key, m.state) for m in response.context["cl"].result_list}


@pytest.fixture
def history(team: Team, other_team: Team) -> None:
    """alpha: a key superseded once and a deleted key; bravo: one active memory."""
    save(team, "deploy", "Deploy with the old script.")
    save(team, "deploy", "Deploy with the new pipeline.", reason="pipeline replaced the script")
    save(team, "gone", "Temporary note.")
    delete(team, "gone", by="agent-b")
    MemoryFactory(team=other_team, key="bravo-note", content="Bravo keeps its own notes.")


@pytest.mark.usefixtures("history")
def test_memory_changelist_shows_every_team_and_filters_by_state(admin_client: Client) -> None:
    assert changelist_rows(admin_client) == {
        ("alpha", "deploy", "active"),
        ("alpha", "deploy", "superseded"),
        ("alpha", "gone", "deleted"),
        ("bravo", "bravo-note", "active"),
    }
    assert changelist_rows(admin_client, "?state=active") == {
        ("alpha", "deploy", "active"),
        ("bravo", "bravo-note", "active"),
    }
    assert changelist_rows(admin_client, "?state=superseded") == {("alpha", "deploy", "superseded")}
    assert changelist_rows(admin_client, "?state=deleted") == {("alpha", "gone", "deleted")}


@pytest.mark.usefixtures("history")
def test_memory_changelist_filters_by_team_and_type(admin_client: Client, other_team: Team) -> None:
    assert changelist_rows(admin_client, f"?team__id__exact={other_team.id}") == {
        ("bravo", "bravo-note", "active")
    }
    assert changelist_rows(admin_client, "?type=decision") == set()


@pytest.mark.usefixtures("history")
def test_memory_changelist_rows_link_to_the_supersede_audit(admin_client: Client, team: Team) -> None:
    response = admin_client.get(reverse("admin:memories_memory_changelist"))

    assert reverse("admin:memories_memory_audit", args=[team.id, "deploy"]) in response.content.decode()


def test_memory_admin_is_read_only(admin_client: Client, team: Team) -> None:
    memory = save(team, "fact", "Water is wet.")
    change_url = reverse("admin:memories_memory_change", args=[memory.pk])

    page = admin_client.get(change_url)
    assert page.status_code == 200
    body = page.content.decode()
    assert "Water is wet." in body
    assert reverse("admin:memories_memory_audit", args=[team.id, "fact"]) in body
    assert 'name="_save"' not in body

    assert admin_client.post(change_url, {"content": "Water is dry."}).status_code == 403
    assert admin_client.get(reverse("admin:memories_memory_add")).status_code == 403
    assert admin_client.get(reverse("admin:memories_memory_delete", args=[memory.pk])).status_code == 403
    with operator_view():
        assert Memory.objects.get(pk=memory.pk).content == "Water is wet."


def test_supersede_audit_shows_every_version_with_who_when_why_and_kind(
    admin_client: Client, team: Team, other_team: Team
) -> None:
    save(team, KEY, "Version one.", by="agent-a")
    save(team, KEY, "Version two.", by="agent-b", reason="moved to kubernetes")
    save(team, KEY, "Version 2, fixed typo.", by="agent-c", reason="minor correction")
    delete(team, KEY, by="agent-d")
    save(other_team, KEY, "Bravo's version.", by="bravo-agent")

    response = admin_client.get(reverse("admin:memories_memory_audit", args=[team.id, KEY]))

    assert response.status_code == 200
    assert [(e.kind, e.by) for e in response.context["events"]] == [
        ("deleted", "agent-d"),
        ("soft", "agent-c"),
        ("hard", "agent-b"),
        ("created", "agent-a"),
    ]
    body = response.content.decode()
    for text in ["Version one.", "Version two.", "Version 2, fixed typo.", "moved to kubernetes"]:
        assert text in body
    for text in ["minor correction", "agent-a", "agent-b", "agent-c", "agent-d"]:
        assert text in body
    rows = body.split('class="audit-event ')[1:]
    assert [row.split('"', 1)[0] for row in rows] == [
        "audit-deleted",
        "audit-soft",
        "audit-hard",
        "audit-created",
    ]
    assert "Version 2, fixed typo." in rows[1] and ">deleted<" in rows[1]
    assert "Bravo&#x27;s version." not in body and "bravo-agent" not in body


def test_supersede_audit_is_404_for_an_unknown_team_or_key(admin_client: Client, team: Team) -> None:
    save(team, "known", "Here.")

    def audit(team_id: int, key: str) -> int:
        return admin_client.get(reverse("admin:memories_memory_audit", args=[team_id, key])).status_code

    assert audit(team.id, "unknown") == 404
    assert audit(999999, "known") == 404


def test_token_admin_never_shows_the_raw_token_or_its_hash(admin_client: Client, team: Team) -> None:
    issued = team_services.create_token(team=team, name="deploy-bot", scopes=["read", "write"], actor="test")
    token = issued.token

    pages = [
        admin_client.get(reverse("admin:teams_agenttoken_changelist")),
        admin_client.get(reverse("admin:teams_agenttoken_changelist") + f"?q={token.prefix}"),
        admin_client.get(reverse("admin:teams_agenttoken_change", args=[token.pk])),
    ]

    for page in pages:
        assert page.status_code == 200
        body = page.content.decode()
        assert "deploy-bot" in body and token.prefix in body
        assert issued.raw not in body
        assert token.token_hash not in body
        assert "token_hash" not in body
    assert admin_client.get(reverse("admin:teams_agenttoken_add")).status_code == 403


def test_revoke_action_revokes_selected_live_tokens_only(
    admin_client: Client, team: Team, other_team: Team
) -> None:
    first = team_services.create_token(team=team, name="one", scopes=["read"], actor="test").token
    second = team_services.create_token(team=other_team, name="two", scopes=["read"], actor="test").token
    kept = team_services.create_token(team=team, name="kept", scopes=["read"], actor="test").token

    response = admin_client.post(
        reverse("admin:teams_agenttoken_changelist"),
        {"action": "revoke_selected_tokens", "_selected_action": [first.pk, second.pk], "index": 0},
        follow=True,
    )

    assert response.status_code == 200
    assert "Revoked 2 token(s)." in response.content.decode()
    with operator_view():
        revoked = {t.name for t in AgentToken.objects.filter(revoked_at__isnull=False)}
    assert revoked == {"one", "two"}
    assert kept.name not in revoked


def test_vault_admin_never_shows_a_secret_value(admin_client: Client, team: Team) -> None:
    with team_scope(team.id):
        secret, _ = team_services.set_vault_entry(
            team=team, key="db-password", value="hunter2-s3cr3t", is_secret=True, actor="alice"
        )
        team_services.set_vault_entry(
            team=team, key="region", value="eu-west-1", is_secret=False, actor="alice"
        )

    listing = admin_client.get(reverse("admin:teams_vaultentry_changelist"))
    detail = admin_client.get(reverse("admin:teams_vaultentry_change", args=[secret.pk]))

    for page in [listing, detail]:
        assert page.status_code == 200
        body = page.content.decode()
        assert "db-password" in body and "********" in body
        assert "hunter2-s3cr3t" not in body
        assert secret.ciphertext not in body
    assert "eu-west-1" in listing.content.decode()
    assert admin_client.get(reverse("admin:teams_vaultentry_add")).status_code == 403


def test_vault_admin_deletes_through_the_service(admin_client: Client, team: Team) -> None:
    with team_scope(team.id):
        entry, _ = team_services.set_vault_entry(
            team=team, key="old-key", value="old-secret-4711", is_secret=True, actor="alice"
        )

    response = admin_client.post(reverse("admin:teams_vaultentry_delete", args=[entry.pk]), {"post": "yes"})

    assert response.status_code == 302
    with operator_view():
        assert not VaultEntry.objects.filter(pk=entry.pk).exists()


def test_team_admin_links_to_the_teams_memories(admin_client: Client, team: Team) -> None:
    response = admin_client.get(reverse("admin:teams_team_changelist"))

    assert response.status_code == 200
    link = reverse("admin:memories_memory_changelist") + f"?team__id__exact={team.id}"
    assert link in response.content.decode()


@pytest.mark.parametrize(
    "url_name, args",
    [
        ("admin:memories_memory_changelist", []),
        ("admin:teams_agenttoken_changelist", []),
        ("admin:teams_vaultentry_changelist", []),
        ("admin:memories_memory_audit", [1, "deploy"]),
    ],
)
def test_non_staff_user_is_redirected_to_login(
    django_user_model: Any, url_name: str, args: list[object]
) -> None:
    client = Client()
    client.force_login(django_user_model.objects.create_user("agent-owner", password="pw"))

    response = client.get(reverse(url_name, args=args))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_anonymous_user_is_redirected_to_login(db: None) -> None:
    response = Client().get(reverse("admin:memories_memory_changelist"))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_every_model_is_named_in_proper_plural_on_the_admin_index(admin_client: Client) -> None:
    from django.apps import apps

    own_apps = {"teams", "memories", "search", "freshness", "agents"}
    plurals = {
        m._meta.label: str(m._meta.verbose_name_plural)
        for m in apps.get_models()
        if m._meta.app_label in own_apps
    }
    # English plurals of these names end in -ies, never in consonant + "ys" ("Memorys").
    wrong = {label: name for label, name in plurals.items() if re.search(r"[^aeiou]ys\b", name)}
    assert wrong == {}
    page = admin_client.get("/admin/").content.decode()
    assert "Memories" in page and "Memorys" not in page
