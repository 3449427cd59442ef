"""Every form: CSRF enforced, labels on every input, and bad input re-rendered with the
error (400), never a 500."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from memories.models import Annotation, Memory
from teams.models import AgentToken, AuditEvent, Membership, Team, VaultEntry
from tests.conftest import operator_view
from tests.dashboard.conftest import PASSWORD, Cast, save


def url(name: str, **kwargs: Any) -> str:
    return reverse(f"dashboard:{name}", kwargs={"slug": "alpha", **kwargs})


def database_state() -> dict[str, list[tuple[Any, ...]]]:
    """Every row a dashboard form can write, across teams, for before/after comparisons."""
    with operator_view():
        return {
            "teams": list(Team.objects.order_by("pk").values_list("pk", "slug", "name")),
            "memories": list(
                Memory.objects.order_by("created_at").values_list(
                    "id", "team_id", "key", "content", "type", "is_active", "deleted_at", "supersedes_id"
                )
            ),
            "annotations": list(Annotation.objects.order_by("created_at").values_list("id", "note")),
            "vault": list(
                VaultEntry.objects.order_by("pk").values_list(
                    "team_id", "key", "value", "ciphertext", "updated_at"
                )
            ),
            "tokens": list(
                AgentToken.objects.order_by("pk").values_list("pk", "name", "scopes", "revoked_at")
            ),
            "memberships": list(
                Membership.objects.order_by("pk").values_list("pk", "team_id", "user_id", "role")
            ),
            "audit": list(AuditEvent.objects.order_by("pk").values_list("pk", "action", "target")),
        }


@pytest.fixture
def deploy(team: Team) -> Memory:
    return save(team, "deploy", "Deploy on Mondays.")


# --- CSRF ----------------------------------------------------------------------------------------


def test_posts_without_a_csrf_token_are_refused(cast: Cast, team: Team, deploy: Memory) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(cast.owner)

    posts = [
        (url("memory_create"), {"key": "x", "content": "y", "type": "context"}),
        (url("memory_delete", key="deploy"), {}),
        (url("vault"), {"key": "k", "value": "v"}),
        (url("tokens"), {"name": "t", "scopes": ["read"]}),
        (url("shutdown"), {"confirm": "alpha"}),
        (reverse("dashboard:logout"), {}),
    ]
    for target, data in posts:
        assert client.post(target, data).status_code == 403, target
    with operator_view():
        assert Team.objects.filter(pk=team.pk).exists()
        assert not Memory.objects.filter(key="x").exists()
        assert Memory.objects.get(key="deploy").is_active


def test_posts_with_the_csrf_token_of_the_page_go_through(cast: Cast, team: Team) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(cast.member)
    page = client.get(url("memory_create")).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]

    response = client.post(
        url("memory_create"),
        {"csrfmiddlewaretoken": token, "key": "with-token", "content": "Saved.", "type": "context"},
    )

    assert response.status_code == 302
    assert response["Location"] == url("memory", key="with-token")
    with operator_view():
        saved = Memory.objects.get(key="with-token")
    assert (saved.team_id, saved.content, saved.type, saved.is_active, saved.updated_by) == (
        team.id,
        "Saved.",
        "context",
        True,
        "user:mia",
    )
    page = client.get(response["Location"]).content.decode()
    assert "with-token" in page and "Saved." in page


def test_sign_in_and_out(cast: Cast) -> None:
    client = Client(enforce_csrf_checks=True)
    login_page = client.get(reverse("dashboard:login"))
    assert login_page.status_code == 200
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login_page.content.decode()).group(1)  # type: ignore[union-attr]

    bad = client.post(
        reverse("dashboard:login"), {"csrfmiddlewaretoken": token, "username": "vera", "password": "x"}
    )
    assert bad.status_code == 200
    assert "Please enter a correct username and password" in bad.content.decode()

    good = client.post(
        reverse("dashboard:login"), {"csrfmiddlewaretoken": token, "username": "vera", "password": PASSWORD}
    )
    assert good.status_code == 302 and good["Location"] == reverse("dashboard:home")
    signed_in = client.get(reverse("dashboard:home"))
    assert signed_in.status_code == 200 and signed_in.wsgi_request.user.get_username() == "vera"

    home = signed_in.content.decode()
    assert url("overview") in home
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', home).group(1)  # type: ignore[union-attr]
    assert client.post(reverse("dashboard:logout"), {"csrfmiddlewaretoken": token}).status_code == 302
    signed_out = client.get(reverse("dashboard:home"))
    assert signed_out.status_code == 302 and signed_out["Location"].startswith(reverse("dashboard:login"))


# --- bad input re-renders the form ------------------------------------------------------------------

LONG = "x" * 70_000


@pytest.mark.usefixtures("deploy")
@pytest.mark.parametrize(
    "role, name, kwargs, data, message",
    [
        (
            "member",
            "memory_create",
            {},
            {"key": "", "content": "", "type": "context"},
            "This field is required.",
        ),
        (
            "member",
            "memory_create",
            {},
            {"key": "bad key!", "content": "x", "type": "context"},
            "A key is 1-200",
        ),
        (
            "member",
            "memory_create",
            {},
            {"key": "k", "content": "x", "type": "wizard"},
            "Select a valid choice",
        ),
        (
            "member",
            "memory_create",
            {},
            {"key": "deploy", "content": "x", "type": "context"},
            "already has an active entry",
        ),
        ("member", "memory_create", {}, {"key": "big", "content": LONG, "type": "context"}, "the limit is"),
        (
            "member",
            "memory_create",
            {},
            {"key": "nul", "content": "a\x00b", "type": "context"},
            "Null characters",
        ),
        (
            "member",
            "memory_edit",
            {"key": "deploy"},
            {"content": "New.", "type": "context", "kind": "hard", "reason": "", "base_version": "{id}"},
            "Give a reason",
        ),
        (
            "member",
            "memory_edit",
            {"key": "deploy"},
            {"content": "Deploy on Mondays.", "type": "context", "kind": "soft", "base_version": "{id}"},
            "Nothing changed",
        ),
        (
            "member",
            "memory_edit",
            {"key": "deploy"},
            {
                "content": "New.",
                "type": "context",
                "kind": "hard",
                "reason": "r",
                "base_version": "00000000-0000-0000-0000-000000000000",
            },
            "changed this memory since you opened it",
        ),
        (
            "member",
            "memory_edit",
            {"key": "deploy"},
            {
                "content": "New.",
                "type": "context",
                "kind": "hard",
                "reason": "r",
                "base_version": "not-a-uuid",
            },
            "This form is out of date",
        ),
        ("member", "memory_unsupersede", {"key": "deploy"}, {"reason": ""}, "This field is required."),
        ("member", "memory_unsupersede", {"key": "deploy"}, {"reason": "why not"}, "no previous version"),
        ("member", "memory_annotate", {"key": "deploy"}, {"note": "   "}, "This field is required."),
        ("member", "memory_annotate", {"key": "deploy"}, {"note": "n" * 2001}, "at most 2000 characters"),
        ("admin", "vault", {}, {"key": "bad key!", "value": "v"}, "A key is 1-200"),
        ("admin", "vault", {}, {"key": "k", "value": ""}, "This field is required."),
        ("admin", "vault_rotate", {"key": "api-key"}, {"value": ""}, "This field is required."),
        ("admin", "tokens", {}, {"name": "", "scopes": []}, "This field is required."),
        ("admin", "tokens", {}, {"name": "n", "scopes": ["root"]}, "Select a valid choice"),
        ("admin", "members", {}, {"username": "vera", "role": "viewer"}, "already a member"),
        ("admin", "members", {}, {"username": "nobody", "role": "czar"}, "Select a valid choice"),
        ("owner", "shutdown", {}, {"confirm": ""}, "This field is required."),
    ],
)
def test_bad_input_re_renders_the_form_with_the_error(
    cast: Cast, team: Team, role: str, name: str, kwargs: dict[str, str], data: dict[str, Any], message: str
) -> None:
    from teams import services as team_services
    from teams.scope import team_scope

    with team_scope(team.id):
        team_services.set_vault_entry(team=team, key="api-key", value="v", is_secret=False, actor="x")
        deploy_id = str(Memory.objects.get(team=team, key="deploy", is_active=True).id)
    data = {k: (v.replace("{id}", deploy_id) if isinstance(v, str) else v) for k, v in data.items()}
    before = database_state()

    response = cast.client(role).post(url(name, **kwargs), data)

    body = response.content.decode()
    assert response.status_code == 400, body[:500]
    assert message in body
    assert 'role="alert"' in body
    assert "<form" in body
    # Refused means nothing written, anywhere.
    assert database_state() == before


@pytest.mark.usefixtures("deploy")
@pytest.mark.parametrize(
    "name, params, message",
    [
        ("search", {"q": ""}, "This field is required."),
        ("search", {"q": "x" * 9000}, "at most 8000 characters"),
        ("search", {"q": "deploy", "max_results": "500"}, "less than or equal to 50"),
        ("search", {"q": "deploy", "mode": "psychic"}, "Select a valid choice"),
        ("injection", {"max_tokens": "1"}, "greater than or equal to 50"),
        ("injection", {"max_entries": "abc"}, "Enter a whole number"),
        ("memories", {"type": "wizard"}, "Select a valid choice"),
        ("memories", {"q": "x" * 9000}, "at most 8000 characters"),
    ],
)
def test_bad_query_parameters_show_the_error(
    cast: Cast, name: str, params: dict[str, str], message: str
) -> None:
    response = cast.client("viewer").get(url(name), params)

    body = response.content.decode()
    assert response.status_code == 400
    assert message in body and 'role="alert"' in body


def test_every_input_of_every_form_page_has_a_label(cast: Cast, team: Team, deploy: Memory) -> None:
    olivia = cast.client("owner")
    pages = [
        url("memory_create"),
        url("memory_edit", key="deploy"),
        url("memories"),
        url("search"),
        url("injection"),
        url("vault"),
        url("tokens"),
        url("members"),
        url("shutdown"),
        url("memory", key="deploy"),
    ]
    for page in pages:
        body = olivia.get(page).content.decode()
        ids = re.findall(
            r'<(?:input|textarea|select)\b(?![^>]*type="(?:hidden|submit)")[^>]*\bid="([^"]+)"', body
        )
        labelled = set(re.findall(r'<label[^>]*\bfor="([^"]+)"', body))
        # Radio and checkbox groups: each option has its own label; the group a legend.
        assert ids, page
        for input_id in ids:
            assert input_id in labelled, (page, input_id)
        unnamed = re.findall(
            r"<(?:input|textarea|select)\b(?![^>]*\bid=)(?![^>]*type=\"(?:hidden|submit)\")[^>]*>", body
        )
        assert unnamed == [], (page, unnamed)
