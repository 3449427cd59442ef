"""Personal entries: a memory whose key, or a fact whose entity, starts with `@<username>`
is seen by that person's own tokens and dashboard pages only: never by a teammate's
token, the team's token, the teammate's dashboard, search, injection or an export."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import AbstractUser
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from memories.models import Memory
from teams import memberships, services
from teams.models import AgentToken, Membership, Team
from teams.scope import team_scope
from tests.conftest import Agent, make_agent, operator_view
from tests.mcp.conftest import call_in_process
from tests.transfer.helpers import export_body, import_file

SECRET_NOTE = "My dotfiles live in the quokka-hollow repository."
PERSONAL_KEY = "@mia:dotfiles"


def join(team: Team, user: AbstractUser, role: str) -> Membership:
    with team_scope(team.id):
        return Membership.objects.create(team=team, user=user, role=role)


def personal_agent(team: Team, user: AbstractUser, scopes: list[str], name: str) -> Agent:
    issued = services.create_token(team=team, name=name, scopes=scopes, actor="test", user_id=user.pk)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.raw}")
    return Agent(team=team, token=issued.raw, client=client)


@pytest.fixture
def mia_user(team: Team, django_user_model: Any) -> AbstractUser:
    user = django_user_model.objects.create_user("mia", "mia@example.com", "pw-for-mia-1234")
    join(team, user, Membership.Role.MEMBER)
    return user


@pytest.fixture
def max_user(team: Team, django_user_model: Any) -> AbstractUser:
    user = django_user_model.objects.create_user("max", "max@example.com", "pw-for-max-1234")
    join(team, user, Membership.Role.ADMIN)
    return user


@pytest.fixture
def mia(team: Team, mia_user: AbstractUser) -> Agent:
    return personal_agent(team, mia_user, ["read", "write"], "mia-laptop")


@pytest.fixture
def max_agent(team: Team, max_user: AbstractUser) -> Agent:
    return personal_agent(team, max_user, ["read", "write", "admin"], "max-laptop")


@pytest.fixture
def saved(mia: Agent) -> dict[str, Any]:
    response = mia.client.post(
        mia.url("memories/"), {"key": PERSONAL_KEY, "content": SECRET_NOTE}, format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()


def test_the_owner_saves_reads_lists_and_finds_a_personal_entry(mia: Agent, saved: dict[str, Any]) -> None:
    got = mia.client.get(mia.url(f"memories/{PERSONAL_KEY}/"))
    assert got.status_code == 200 and got.json()["scope"] == "user:mia"
    listed = mia.client.get(mia.url("memories/")).json()["results"]
    assert [m["key"] for m in listed] == [PERSONAL_KEY]
    found = mia.client.post(
        mia.url("search/"), {"query": "quokka hollow dotfiles", "mode": "keyword"}, format="json"
    )
    assert PERSONAL_KEY in found.content.decode()
    with operator_view():
        row = Memory.objects.get(key=PERSONAL_KEY)
    assert row.owner is not None and row.owner.get_username() == "mia"


@pytest.mark.parametrize("who", ["teammate", "team_token"])
def test_no_one_else_sees_a_personal_entry_on_any_rest_route(
    who: str, saved: dict[str, Any], max_agent: Agent, admin_member: Agent
) -> None:
    other = max_agent if who == "teammate" else admin_member
    for path in (f"memories/{PERSONAL_KEY}/", f"memories/{PERSONAL_KEY}/history/"):
        response = other.client.get(other.url(path))
        assert response.status_code == 404, (path, response.content)
        assert "quokka" not in response.content.decode()
    responses = [
        other.client.get(other.url("memories/")),
        other.client.post(other.url("search/"), {"query": "quokka hollow dotfiles"}, format="json"),
        other.client.post(other.url("search/"), {"query": "quokka", "mode": "keyword"}, format="json"),
        other.client.get(other.url("injection/")),
        other.client.get(other.url("export/")),
    ]
    for response in responses:
        assert response.status_code == 200, response.content
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert b"quokka" not in body and PERSONAL_KEY.encode() not in body


@pytest.mark.django_db(transaction=True)
def test_no_one_else_sees_a_personal_entry_over_mcp(
    saved: dict[str, Any], max_agent: Agent, mia: Agent
) -> None:
    status, body = call_in_process(max_agent.token, "memory_get", {"key": PERSONAL_KEY})
    assert status == 200 and body["error"] == "not_found" and "quokka" not in str(body)
    status, body = call_in_process(max_agent.token, "memory_search", {"query": "quokka hollow dotfiles"})
    assert status == 200 and "quokka" not in str(body)
    status, body = call_in_process(mia.token, "memory_search", {"query": "quokka hollow dotfiles"})
    assert status == 200 and "quokka" in str(body)


def test_the_owners_sessions_get_their_personal_entries_and_no_one_elses(
    saved: dict[str, Any], mia: Agent, max_agent: Agent
) -> None:
    max_agent.client.post(
        max_agent.url("memories/"), {"key": "@max:shell", "content": "I use fish shell."}, format="json"
    )
    mia_text = mia.client.get(mia.url("injection/")).json()["text"]
    max_text = max_agent.client.get(max_agent.url("injection/")).json()["text"]
    assert "quokka" in mia_text and "fish shell" not in mia_text
    assert "fish shell" in max_text and "quokka" not in max_text


@pytest.mark.parametrize("key", ["@mia:dotfiles", "@mia", "@nobody:notes"])
def test_only_the_owner_may_write_a_personal_key(
    key: str, max_agent: Agent, member: Agent, mia_user: Any
) -> None:
    for writer in (max_agent, member):
        response = writer.client.post(
            writer.url("memories/"), {"key": key, "content": "mine now"}, format="json"
        )
        assert response.status_code == 403, response.content
        assert response.json()["error"] == "personal_entry"
    with operator_view():
        assert not Memory.objects.filter(key=key).exists()


def test_the_same_text_in_a_personal_entry_is_no_duplicate_of_the_teams(
    mia: Agent, saved: dict[str, Any]
) -> None:
    response = mia.client.post(
        mia.url("memories/"), {"key": "team-dotfiles", "content": SECRET_NOTE}, format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["key"] == "team-dotfiles"
    with operator_view():
        assert Memory.objects.get(key=PERSONAL_KEY).is_active


def test_personal_facts_are_the_owners_alone(mia: Agent, max_agent: Agent, member: Agent) -> None:
    put = mia.client.put(mia.url("facts/@mia/editor/"), {"value": "helix"}, format="json")
    assert put.status_code in (200, 201), put.content
    assert (
        put.json()["fact"]["scope"] == "user:mia"
        if "fact" in put.json()
        else put.json()["scope"] == "user:mia"
    )
    assert mia.client.get(mia.url("facts/@mia/editor/")).status_code == 200
    assert "helix" in mia.client.get(mia.url("injection/")).json()["text"]
    for other in (max_agent, member):
        got = other.client.get(other.url("facts/@mia/editor/"))
        assert got.status_code == 404 and "helix" not in got.content.decode()
        assert "helix" not in other.client.get(other.url("facts/")).content.decode()
        assert "helix" not in other.client.get(other.url("injection/")).json()["text"]
        refused = other.client.put(
            other.url("facts/@mia/editor/"), {"value": "vim", "reason": "x"}, format="json"
        )
        assert refused.status_code == 403, refused.content
    wrong_scope = mia.client.put(
        mia.url("facts/alpha/editor/"), {"value": "vim", "scope": "user:mia"}, format="json"
    )
    assert wrong_scope.status_code == 400 and "scope" in str(wrong_scope.json()), wrong_scope.content


def test_a_personal_tokens_scopes_stop_at_its_owners_role(team: Team, mia_user: Any) -> None:
    with pytest.raises(Exception, match="admin"):
        services.create_token(team=team, name="too-much", scopes=["admin"], actor="t", user_id=mia_user.pk)
    viewer_only = services.create_token(
        team=team, name="ok", scopes=["read", "write"], actor="t", user_id=mia_user.pk
    )
    assert viewer_only.token.user_id == mia_user.pk


def test_leaving_the_team_revokes_the_persons_own_tokens(team: Team, mia: Agent, mia_user: Any) -> None:
    with team_scope(team.id):
        membership_id = Membership.objects.get(team=team, user=mia_user).pk
        memberships.remove_member(team=team, membership_id=membership_id, by=None)
    with operator_view():
        assert AgentToken.objects.get(name="mia-laptop").revoked_at is not None
    assert mia.client.get(mia.url("memories/")).status_code == 401


def test_the_dashboard_shows_personal_entries_to_their_owner_only(
    team: Team, saved: dict[str, Any], mia_user: AbstractUser, max_user: AbstractUser
) -> None:
    mia_page, max_page = Client(), Client()
    mia_page.force_login(mia_user)
    max_page.force_login(max_user)
    detail = reverse("dashboard:memory", kwargs={"slug": team.slug, "key": PERSONAL_KEY})
    listing = reverse("dashboard:memories", kwargs={"slug": team.slug})
    assert mia_page.get(detail).status_code == 200
    mine = mia_page.get(listing).content.decode()
    assert "quokka" in mine and "user:mia" in mine
    assert max_page.get(detail).status_code == 404
    assert "quokka" not in max_page.get(listing).content.decode()
    search = reverse("dashboard:search", kwargs={"slug": team.slug})
    assert SECRET_NOTE in mia_page.get(search, {"q": "dotfiles hollow repository"}).content.decode()
    assert SECRET_NOTE not in max_page.get(search, {"q": "dotfiles hollow repository"}).content.decode()


def test_a_lower_role_revokes_the_persons_tokens_that_could_do_more(
    team: Team, max_user: Any, max_agent: Agent
) -> None:
    reader = personal_agent(team, max_user, ["read"], "max-reader")
    with team_scope(team.id):
        membership_id = Membership.objects.get(team=team, user=max_user).pk
        memberships.change_member_role(team=team, membership_id=membership_id, role="viewer", by=None)
    assert max_agent.client.get(max_agent.url("memories/")).status_code == 401
    assert reader.client.get(reader.url("memories/")).status_code == 200


def test_an_export_carries_the_exporters_personal_entries_and_their_import_keeps_them_personal(
    other_team: Team, max_user: Any, max_agent: Agent
) -> None:
    max_agent.client.post(
        max_agent.url("memories/"),
        {"key": "@max:notes", "content": "Max keeps a lantern-moth log."},
        format="json",
    )
    max_agent.client.put(max_agent.url("facts/@max/editor/"), {"value": "kakoune"}, format="json")
    body = export_body(max_agent)
    assert b"lantern-moth" in body and b"kakoune" in body
    join(other_team, max_user, Membership.Role.ADMIN)
    max_in_bravo = personal_agent(other_team, max_user, ["read", "write", "admin"], "max-in-bravo")
    bravo_team_token = make_agent(other_team, "bravo-admin", ["read", "write", "admin"])

    refused = import_file(bravo_team_token, body)
    assert refused.json()["created"] == 0 and "personal_entry" in refused.content.decode(), refused.content
    imported = import_file(max_in_bravo, body)
    assert imported.status_code in (200, 201), imported.content

    got = max_in_bravo.client.get(max_in_bravo.url("memories/@max:notes/"))
    assert got.status_code == 200 and got.json()["scope"] == "user:max"
    assert max_in_bravo.client.get(max_in_bravo.url("facts/@max/editor/")).json()["value"] == "kakoune"
    assert bravo_team_token.client.get(bravo_team_token.url("memories/@max:notes/")).status_code == 404
    assert b"lantern-moth" not in export_body(bravo_team_token)


def test_a_persons_own_transcript_is_theirs_alone(
    mia: Agent, max_agent: Agent, member: Agent, django_capture_on_commit_callbacks: Any
) -> None:
    lines = [
        {"role": "user", "text": "Remind me: my wombat-lantern side project builds with zig."},
        {"role": "assistant", "text": "Noted, the wombat-lantern build uses zig."},
    ]
    with django_capture_on_commit_callbacks(execute=True):
        stored = mia.client.post(mia.url("conversations/"), {"lines": lines}, format="json")
        team_talk = member.client.post(
            member.url("conversations/"),
            {"lines": [{"role": "user", "text": "Team standup at nine."}]},
            format="json",
        )
    assert stored.status_code == 201 and team_talk.status_code == 201, (stored.content, team_talk.content)
    path = f"conversations/{stored.json()['id']}/"
    assert mia.client.get(mia.url(path)).status_code == 200
    query = {"query": "wombat-lantern zig build", "sources": ["conversations"], "mode": "keyword"}
    assert "wombat" in mia.client.post(mia.url("search/"), query, format="json").content.decode()
    for other in (max_agent, member):
        got = other.client.get(other.url(path))
        assert got.status_code == 404 and "wombat" not in got.content.decode()
        assert "wombat" not in other.client.get(other.url("conversations/")).content.decode()
        assert "wombat" not in other.client.post(other.url("search/"), query, format="json").content.decode()
    # The team's own transcripts stay the team's: the person sees them too.
    assert mia.client.get(mia.url(f"conversations/{team_talk.json()['id']}/")).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_personal_fact_is_not_found_over_mcp_by_anyone_else(mia: Agent, max_agent: Agent) -> None:
    assert mia.client.put(mia.url("facts/@mia/editor/"), {"value": "helix"}, format="json").status_code == 201
    status, body = call_in_process(max_agent.token, "fact_get", {"entity": "@mia", "key": "editor"})
    assert status == 200 and body["error"] == "not_found" and "helix" not in str(body)
    status, body = call_in_process(mia.token, "fact_get", {"entity": "@mia", "key": "editor"})
    assert status == 200 and "helix" in str(body)


@pytest.mark.django_db(transaction=True)
def test_a_nudge_about_a_personal_entry_is_its_owners_alone(
    team: Team,
    saved: dict[str, Any],
    mia: Agent,
    max_agent: Agent,
    admin_member: Agent,
    max_user: AbstractUser,
) -> None:
    """The team's jobs see every owner's entries (the due job here): what they open about
    a personal entry (its key, its text) reaches no one but the owner."""
    from datetime import timedelta

    from django.utils import timezone

    from dashboard.selectors import open_review_count
    from freshness.models import Nudge
    from freshness.services import mark_due_entries

    with operator_view():
        Memory.objects.filter(key=PERSONAL_KEY).update(last_confirmed_at=timezone.now() - timedelta(days=400))
    assert mark_due_entries().flagged >= 1
    with operator_view():
        assert Nudge.objects.filter(memory__key=PERSONAL_KEY).count() == 1

    mine = mia.client.get(mia.url("nudges/")).content.decode()
    assert PERSONAL_KEY in mine
    for other in (max_agent, admin_member):
        assert PERSONAL_KEY not in other.client.get(other.url("nudges/")).content.decode()
        assert PERSONAL_KEY not in other.client.get(other.url("injection/")).json()["text"]
        status, body = call_in_process(other.token, "memory_nudges", {})
        assert status == 200 and PERSONAL_KEY not in str(body)
    with team_scope(team.id, viewer=str(max_user.pk)):
        assert open_review_count(team=team) == 0
    review = Client()
    review.force_login(max_user)
    page = review.get(reverse("dashboard:review", kwargs={"slug": team.slug})).content.decode()
    assert PERSONAL_KEY not in page
