"""The facts page: every member lists the team's facts, `high` values masked; members
reveal one with a POST that is audited; viewers may not; another team's person gets
the dashboard's 404."""

from __future__ import annotations

from memories.facts.services import set_fact
from teams.models import AuditEvent, Team
from teams.scope import team_scope
from tests.conftest import operator_view
from tests.dashboard.conftest import Cast

IBAN = "DE89-3704-0044-0532"


def seed(team: Team) -> None:
    with team_scope(team.id):
        set_fact(team=team, entity="acme", key="provider", value="Paddle", actor="bot", domains=["payments"])
        set_fact(team=team, entity="acme", key="iban", value=IBAN, actor="bot", sensitivity="high")
        set_fact(team=team, entity="ann", key="editor", value="vim", actor="bot", scope="project:tools")


def test_every_member_sees_the_facts_with_high_values_masked(team: Team, cast: Cast) -> None:
    seed(team)
    for role in ("viewer", "member", "owner"):
        response = cast.client(role).get(f"/teams/{team.slug}/facts/")
        assert response.status_code == 200
        page = response.content.decode()
        assert "Paddle" in page and "acme" in page and "iban" in page
        assert IBAN not in page
        assert ("/facts/acme/iban/reveal/" in page) is (role != "viewer")


def test_filters_narrow_the_list_and_bad_ones_are_400(team: Team, cast: Cast) -> None:
    seed(team)
    client = cast.client("member")
    by_domain = client.get(f"/teams/{team.slug}/facts/", {"domain": "payments"}).content.decode()
    assert "Paddle" in by_domain and "vim" not in by_domain
    by_scope = client.get(f"/teams/{team.slug}/facts/", {"scope": "project:tools"}).content.decode()
    assert "vim" in by_scope and "Paddle" not in by_scope
    assert client.get(f"/teams/{team.slug}/facts/", {"scope": "everyone"}).status_code == 400


def test_a_member_reveals_a_high_value_and_the_reveal_is_audited(team: Team, cast: Cast) -> None:
    seed(team)
    client = cast.client("member")

    assert client.get(f"/teams/{team.slug}/facts/acme/iban/reveal/").status_code == 405
    response = client.post(f"/teams/{team.slug}/facts/acme/iban/reveal/")

    assert response.status_code == 200 and IBAN in response.content.decode()
    assert "no-store" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]
    with operator_view():
        [event] = AuditEvent.objects.filter(team=team, action=AuditEvent.Action.FACT_REVEAL)
    assert (event.actor, event.target) == ("user:mia", "acme/iban")


def test_a_viewer_may_not_reveal(team: Team, cast: Cast) -> None:
    seed(team)
    response = cast.client("viewer").post(f"/teams/{team.slug}/facts/acme/iban/reveal/")
    assert response.status_code == 403 and IBAN not in response.content.decode()
    with operator_view():
        assert not AuditEvent.objects.filter(action=AuditEvent.Action.FACT_REVEAL).exists()


def test_another_teams_person_gets_404_and_nothing_of_the_team(team: Team, cast: Cast) -> None:
    seed(team)
    client = cast.client("outsider")
    for method, path in (
        ("get", "facts/"),
        ("post", "facts/acme/iban/reveal/"),
        ("post", "facts/acme/provider/reveal/"),
    ):
        response = getattr(client, method)(f"/teams/{team.slug}/{path}")
        assert response.status_code == 404
        assert b"Paddle" not in response.content and IBAN.encode() not in response.content


def test_an_unknown_or_malformed_fact_is_404(team: Team, cast: Cast) -> None:
    seed(team)
    client = cast.client("member")
    assert client.post(f"/teams/{team.slug}/facts/acme/nothing/reveal/").status_code == 404
    assert client.post(f"/teams/{team.slug}/facts/-bad/iban/reveal/").status_code == 404
