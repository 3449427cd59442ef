"""First run and accounts from the terminal: `bootstrap`, `add_member`, `remove_member`
and `password_link`, and the one-time links they print."""

from __future__ import annotations

import re
import threading
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from teams.models import AgentToken, AuditEvent, Membership, Team
from tests.conftest import operator_view

NEW_PASSWORD = "a long and unusual passphrase 42"
LINK = re.compile(r"https?://\S+/password-reset/[^/\s]+/[^/\s]+/")


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def set_password_with(link: str, password: str = NEW_PASSWORD) -> Client:
    """Open a one-time link as a browser would and set the password; returns the client."""
    client = Client()
    path = "/" + link.split("/", 3)[3]
    opened = client.get(path)
    assert opened.status_code == 302, opened.status_code  # to the form, token out of the URL
    form_url = opened["Location"]
    assert client.get(form_url).status_code == 200
    done = client.post(form_url, {"new_password1": password, "new_password2": password})
    assert done.status_code == 302 and done["Location"] == "/password-reset/done/", done.status_code
    return client


def signs_in(username: str, password: str = NEW_PASSWORD) -> bool:
    response = Client().post("/login/", {"username": username, "password": password})
    return response.status_code == 302 and response["Location"] == "/"


def link_is_spent(link: str) -> bool:
    response = Client().get("/" + link.split("/", 3)[3], follow=True)
    return "This link has been used or has expired." in response.content.decode()


def test_bootstrap_sets_up_a_team_an_owner_who_signs_in_with_the_link_and_a_working_token(
    db: None, settings
) -> None:
    settings.MEMORYHUB_BASE_URL = "http://memoryhub.example:8000/"

    output = run("bootstrap", "--team", "acme", "--username", "ada", "--email", "ada@example.com")

    link = LINK.search(output).group(0)
    token = re.search(r"MEMORYHUB_TOKEN=(mh_\S+)", output).group(1)
    assert "Open the dashboard: http://memoryhub.example:8000/" in output
    assert link.startswith("http://memoryhub.example:8000/password-reset/")
    assert "memoryhub connect claude-code --team acme --url http://memoryhub.example:8000 --write" in output
    user = get_user_model().objects.get(username="ada")
    assert user.email == "ada@example.com" and not user.has_usable_password()
    with operator_view():
        assert list(Membership.objects.values_list("team__slug", "user__username", "role")) == [
            ("acme", "ada", "owner")
        ]
        assert AgentToken.objects.get().scopes == ["read", "write"]
        assert AuditEvent.objects.filter(action="member.add", actor="manage.py").exists()

    set_password_with(link)
    assert signs_in("ada")
    assert link_is_spent(link)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert (
        api.post("/api/v1/teams/acme/memories/", {"key": "k", "content": "c"}, format="json").status_code
        == 201
    )


def test_a_later_bootstrap_creates_nothing_and_says_what_exists(db: None) -> None:
    run("bootstrap", "--team", "acme", "--username", "ada")

    again = run("bootstrap", "--team", "other", "--username", "bob")

    assert "set up already: acme (owners: ada)" in again
    assert "password_link USERNAME" in again and "create_token" in again
    assert list(Team.objects.values_list("slug", flat=True)) == ["acme"]
    assert not get_user_model().objects.filter(username="bob").exists()
    with operator_view():
        assert AgentToken.objects.count() == 1


def test_bootstrap_if_empty_leaves_a_database_with_accounts_alone(db: None, django_user_model) -> None:
    django_user_model.objects.create_superuser("root", "root@example.com", NEW_PASSWORD)

    output = run("bootstrap", "--if-empty")

    assert "nothing to set up" in output
    assert not Team.objects.exists()


def test_bootstrap_gives_an_existing_account_the_owner_role(db: None, django_user_model) -> None:
    django_user_model.objects.create_user("root", "root@example.com", NEW_PASSWORD)

    output = run("bootstrap", "--team", "acme", "--username", "root")

    with operator_view():
        assert Membership.objects.get().role == "owner"
    assert LINK.search(output)


@pytest.mark.django_db(transaction=True)
def test_two_bootstraps_at_once_make_one_team_and_one_owner() -> None:
    barrier = threading.Barrier(2)
    outputs: list[str] = []

    def bootstrap(team: str, username: str) -> None:
        try:
            barrier.wait(10)
            outputs.append(run("bootstrap", "--team", team, "--username", username))
        finally:
            connection.close()

    threads = [threading.Thread(target=bootstrap, args=args) for args in [("one", "ann"), ("two", "ben")]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert Team.objects.count() == 1
    assert get_user_model().objects.count() == 1
    assert sorted("set up already" in output for output in outputs) == [False, True]


def test_bootstrap_refuses_a_bad_team_slug(db: None) -> None:
    with pytest.raises(CommandError, match="not a valid team slug"):
        run("bootstrap", "--team", "Not A Slug")
    assert not get_user_model().objects.exists()


def test_add_member_create_prints_a_link_and_adds_the_new_account(team: Team) -> None:
    output = run("add_member", team.slug, "nia", "--role", "admin", "--create", "--email", "nia@example.com")

    assert f"nia is now admin of team {team.slug}" in output
    link = output.strip().splitlines()[-1]
    assert LINK.fullmatch(link)
    with operator_view():
        assert Membership.objects.get(team=team, user__username="nia").role == "admin"
    set_password_with(link)
    assert signs_in("nia")


def test_add_member_adds_an_existing_account_without_a_link(team: Team, django_user_model) -> None:
    django_user_model.objects.create_user("omar", "omar@example.com", NEW_PASSWORD)

    output = run("add_member", team.slug, "omar", "--role", "viewer")

    assert not LINK.search(output)
    with operator_view():
        assert Membership.objects.get(team=team, user__username="omar").role == "viewer"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["ghost-team", "omar", "--role", "member"], "no team 'ghost-team'"),
        (["{team}", "nobody", "--role", "member"], "no account named 'nobody'; add --create"),
        (["{team}", "omar", "--role", "member", "--create"], "an account named 'omar' already exists"),
        (["{team}", "omar", "--role", "member", "--email", "o@example.com"], "add --create"),
        (["{team}", "omar", "--role", "emperor"], "invalid choice"),
    ],
)
def test_add_member_refuses_clearly(team: Team, django_user_model, args: list[str], error: str) -> None:
    django_user_model.objects.create_user("omar", "omar@example.com", NEW_PASSWORD)

    with pytest.raises(CommandError, match=re.escape(error)):
        run("add_member", *[a.format(team=team.slug) for a in args])
    with operator_view():
        assert not Membership.objects.exists()
    assert django_user_model.objects.count() == 1


def test_add_member_twice_is_a_clear_error(team: Team) -> None:
    run("add_member", team.slug, "nia", "--role", "member", "--create")
    with pytest.raises(CommandError, match="already a member"):
        run("add_member", team.slug, "nia", "--role", "admin")


def test_remove_member_removes_but_keeps_the_last_owner(team: Team, other_team: Team) -> None:
    run("add_member", team.slug, "olga", "--role", "owner", "--create")
    run("add_member", team.slug, "max", "--role", "member", "--create")
    run("add_member", other_team.slug, "olga", "--role", "owner")

    assert "max removed from team" in run("remove_member", team.slug, "max")
    with pytest.raises(CommandError, match="keeps at least one owner"):
        run("remove_member", team.slug, "olga")
    with pytest.raises(CommandError, match="not a member of team"):
        run("remove_member", team.slug, "max")
    with pytest.raises(CommandError, match="no team 'ghost'"):
        run("remove_member", "ghost", "olga")
    with operator_view():
        assert sorted(Membership.objects.values_list("team__slug", "user__username")) == sorted(
            [(team.slug, "olga"), (other_team.slug, "olga")]
        )
        assert AuditEvent.objects.filter(team=team, action="member.remove", target="max").exists()


def test_password_link_works_once(db: None, django_user_model) -> None:
    django_user_model.objects.create_user("omar", "omar@example.com", "an old passphrase 1234")

    link = run("password_link", "omar").strip().splitlines()[-1]

    set_password_with(link)
    assert signs_in("omar")
    assert link_is_spent(link)
    with pytest.raises(CommandError, match="no active account named 'ghost'"):
        run("password_link", "ghost")
