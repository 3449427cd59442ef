"""Facts in the injection block: their own section right after identity, `normal` only,
the team's and the project's (never a personal one), within a share of the budget."""

from __future__ import annotations

from typing import Any

from agents.injection import build_injection
from agents.injection.facts import FACT_BUDGET_SHARE, FACTS_HEADING
from memories.facts.services import set_fact
from search.tokens import count_tokens
from teams.models import Membership, Team
from teams.scope import team_scope
from tests.agents.test_injection import inject, remember
from tests.conftest import Agent


def fact(team: Team, entity: str, key: str, value: str, **extra: Any) -> None:
    with team_scope(team.id):
        set_fact(team=team, entity=entity, key=key, value=value, actor="tester", **extra)


def test_facts_have_their_own_section_right_after_identity(team: Team, member: Agent) -> None:
    remember(team, "who", "I am the release agent.", "identity")
    remember(team, "lesson", "Always tag a release before deploying it.", "lesson")
    fact(team, "project-alpha", "payments.provider", "Paddle")
    fact(team, "project-alpha", "region", "eu-west-1")

    body = inject(member)
    text = body["text"]

    assert text.index("### Identity") < text.index(FACTS_HEADING) < text.index("### Lessons")
    assert "[FACT] [project-alpha/payments.provider]: Paddle" in text
    assert "[FACT] [project-alpha/region]: eu-west-1" in text
    assert body["counts"]["included_facts"] == 2
    assert body["tokens"]["used"] == count_tokens(text)


def test_high_and_personal_facts_are_never_injected(
    team: Team, member: Agent, django_user_model: Any
) -> None:
    ann = django_user_model.objects.create_user("ann")
    with team_scope(team.id):
        Membership.objects.create(team=team, user=ann, role=Membership.Role.MEMBER)
    fact(team, "acme", "iban", "DE89-3704-0044", sensitivity="high")
    fact(team, "@ann", "editor", "vim")
    fact(team, "acme", "provider", "Paddle")

    text = inject(member)["text"]

    assert "Paddle" in text
    assert "DE89" not in text and "vim" not in text


def test_project_facts_follow_the_project_filter(team: Team, member: Agent) -> None:
    fact(team, "web", "framework", "Django", scope="project:web")
    fact(team, "mobile", "framework", "Flutter", scope="project:mobile")
    fact(team, "acme", "provider", "Paddle")

    assert {"Django", "Flutter", "Paddle"} <= set(inject(member)["text"].replace("\n", " ").split(" "))
    web = inject(member, project="web")["text"]
    assert "Django" in web and "Paddle" in web and "Flutter" not in web
    team_only = inject(member, project="")["text"]
    assert "Paddle" in team_only and "Django" not in team_only


def test_an_only_facts_team_does_not_say_it_has_nothing(team: Team, member: Agent) -> None:
    fact(team, "acme", "provider", "Paddle")
    body = inject(member)
    assert "No memories to inject." not in body["text"]
    assert body["tokens"]["used"] == count_tokens(body["text"])


def test_facts_take_at_most_their_share_of_the_budget_and_leave_the_rest_to_memories(team: Team) -> None:
    for i in range(40):
        fact(
            team,
            f"service-{i:02d}",
            "owner",
            f"The owner of service {i} is the platform team, on call weekly.",
        )
    remember(team, "lesson", "Always tag a release before deploying it.", "lesson")
    budget = 400

    with team_scope(team.id):
        result = build_injection(team=team, max_tokens=budget)

    facts_tokens = count_tokens(FACTS_HEADING) + sum(f.tokens for f in result.facts)
    assert 0 < len(result.facts) < 40
    assert facts_tokens <= budget // FACT_BUDGET_SHARE
    assert [e.key for e in result.included] == ["lesson"]
    assert result.tokens_used <= budget
    assert result.tokens_used == count_tokens(result.text)


def test_identity_over_the_budget_leaves_no_room_for_facts(team: Team) -> None:
    remember(team, "who", "I am the release agent. " * 40, "identity")
    fact(team, "acme", "provider", "Paddle")

    with team_scope(team.id):
        result = build_injection(team=team, max_tokens=60)

    assert result.facts == [] and FACTS_HEADING not in result.text


def test_fact_values_are_scrubbed_of_vault_secrets_added_later(team: Team, member: Agent) -> None:
    from teams.services import set_vault_entry

    fact(team, "acme", "db", "the db password is zq-very-long-secret-77")
    with team_scope(team.id):
        set_vault_entry(team=team, key="db", value="zq-very-long-secret-77", is_secret=True, actor="t")

    assert "zq-very-long-secret-77" not in inject(member)["text"]
