"""Facts: set, supersede with a reason, history and as_of reads, delete, visibility of
`high` facts, against the real database."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import IntegrityError, transaction

from memories.facts import selectors
from memories.facts.exceptions import FactConflict, FactNotFound
from memories.facts.models import Fact
from memories.facts.services import delete_fact, delete_team_facts, set_fact
from teams.models import Team
from teams.scope import team_scope
from teams.services import set_vault_entry

pytestmark = pytest.mark.django_db


def test_a_new_fact_is_created_with_its_attributes_and_provenance(team: Team) -> None:
    with team_scope(team.id):
        result = set_fact(
            team=team,
            entity="project-alpha",
            key="payments.provider",
            value="Paddle",
            actor="writer-bot/s1",
            session="s1",
            scope="project:alpha",
            domains=["payments"],
            confidence=0.8,
        )
    fact = result.fact
    assert result.outcome == "created"
    assert (fact.value, fact.scope, fact.domains, fact.sensitivity, fact.confidence) == (
        "Paddle",
        "project:alpha",
        ["payments"],
        "normal",
        0.8,
    )
    assert (fact.updated_by, fact.session, fact.is_active) == ("writer-bot/s1", "s1", True)


def test_setting_the_same_value_again_writes_nothing(team: Team) -> None:
    with team_scope(team.id):
        first = set_fact(team=team, entity="alpha", key="provider", value="Paddle", actor="a").fact
        again = set_fact(team=team, entity="alpha", key="provider", value="Paddle", actor="b")
        assert again.outcome == "unchanged" and again.fact.id == first.id
        assert Fact.objects.filter(team=team).count() == 1


def test_a_different_value_without_a_reason_is_refused_with_the_current_value(team: Team) -> None:
    with team_scope(team.id):
        first = set_fact(team=team, entity="alpha", key="provider", value="Paddle", actor="a").fact
        with pytest.raises(FactConflict) as refused:
            set_fact(team=team, entity="alpha", key="provider", value="Stripe", actor="b", reason="  ")
        assert refused.value.extra["current"].id == first.id
        assert "Paddle" in refused.value.detail
        assert selectors.get_fact(
            team_id=team.id, entity="alpha", key="provider", may_see_high=True
        ).value == ("Paddle")


def test_a_reason_supersedes_and_history_and_as_of_keep_the_old_value(team: Team) -> None:
    with team_scope(team.id):
        old = set_fact(
            team=team, entity="alpha", key="provider", value="Paddle", actor="a", domains=["pay"]
        ).fact
        between = dt.datetime.now(dt.UTC)
        new = set_fact(team=team, entity="alpha", key="provider", value="Stripe", actor="b", reason="moved")
        assert new.outcome == "superseded" and new.superseded is not None and new.superseded.id == old.id
        # Left-out attributes carry over.
        assert new.fact.domains == ["pay"] and new.fact.supersedes_id == old.id
        assert new.fact.supersede_reason == "moved"
        then = selectors.get_fact(
            team_id=team.id, entity="alpha", key="provider", may_see_high=True, as_of=between
        )
        assert then.value == "Paddle"
        versions = selectors.fact_versions(team_id=team.id, entity="alpha", key="provider", may_see_high=True)
        assert [f.value for f in versions.order_by("-created_at")] == ["Stripe", "Paddle"]
        with pytest.raises(FactNotFound):
            selectors.get_fact(
                team_id=team.id,
                entity="alpha",
                key="provider",
                may_see_high=True,
                as_of=old.created_at - dt.timedelta(seconds=1),
            )


def test_the_same_value_with_other_attributes_is_a_new_version_naming_what_changed(team: Team) -> None:
    with team_scope(team.id):
        set_fact(team=team, entity="alpha", key="provider", value="Paddle", actor="a")
        result = set_fact(
            team=team, entity="alpha", key="provider", value="Paddle", actor="a", sensitivity="high"
        )
    assert result.outcome == "superseded"
    assert result.fact.supersede_reason == "changed: sensitivity"


def test_high_facts_are_hidden_from_readers_that_may_not_see_them(team: Team) -> None:
    with team_scope(team.id):
        set_fact(team=team, entity="alpha", key="bank", value="DE89 3704", actor="a", sensitivity="high")
        set_fact(team=team, entity="alpha", key="provider", value="Paddle", actor="a")
        with pytest.raises(FactNotFound):
            selectors.get_fact(team_id=team.id, entity="alpha", key="bank", may_see_high=False)
        with pytest.raises(FactNotFound):
            selectors.fact_versions(team_id=team.id, entity="alpha", key="bank", may_see_high=False)
        listed = selectors.list_facts(team_id=team.id, may_see_high=False, entity="alpha")
        assert [f.key for f in listed] == ["provider"]
        assert selectors.list_facts(team_id=team.id, may_see_high=True, entity="alpha").count() == 2


def test_lists_filter_by_domain_and_scope(team: Team) -> None:
    with team_scope(team.id):
        set_fact(team=team, entity="alpha", key="provider", value="Paddle", actor="a", domains=["payments"])
        set_fact(team=team, entity="alpha", key="editor", value="vim", actor="a", scope="project:tools")
        by_domain = selectors.list_facts(team_id=team.id, may_see_high=True, domain="payments")
        by_scope = selectors.list_facts(team_id=team.id, may_see_high=True, scope="project:tools")
        assert [f.key for f in by_domain] == ["provider"]
        assert [f.key for f in by_scope] == ["editor"]


def test_values_are_scrubbed_of_credentials_and_vault_secrets(team: Team) -> None:
    with team_scope(team.id):
        set_vault_entry(team=team, key="db-password", value="hunter2-very-long-x", is_secret=True, actor="t")
        result = set_fact(
            team=team, entity="alpha", key="db", value="password hunter2-very-long-x", actor="a"
        )
    assert "hunter2-very-long-x" not in result.fact.value
    assert result.redactions


def test_delete_keeps_the_version_in_history_and_a_second_delete_is_not_found(team: Team) -> None:
    with team_scope(team.id):
        set_fact(team=team, entity="alpha", key="provider", value="Paddle", actor="a")
        deleted = delete_fact(team=team, entity="alpha", key="provider", actor="b")
        assert deleted.deleted_by == "b" and not deleted.is_active
        with pytest.raises(FactNotFound):
            delete_fact(team=team, entity="alpha", key="provider", actor="b")
        assert (
            selectors.fact_versions(
                team_id=team.id, entity="alpha", key="provider", may_see_high=True
            ).count()
            == 1
        )
        # A deleted fact is set again as a new fact, without a reason.
        assert (
            set_fact(team=team, entity="alpha", key="provider", value="Stripe", actor="a").outcome
            == "created"
        )


def test_the_database_allows_one_active_version_per_entity_and_key(team: Team) -> None:
    with team_scope(team.id):
        set_fact(team=team, entity="alpha", key="provider", value="Paddle", actor="a")
        with pytest.raises(IntegrityError), transaction.atomic():
            Fact.objects.create(team=team, entity="alpha", key="provider", value="Stripe")


def test_team_shutdown_deletes_every_version(team: Team) -> None:
    with team_scope(team.id):
        set_fact(team=team, entity="alpha", key="provider", value="Paddle", actor="a")
        set_fact(team=team, entity="alpha", key="provider", value="Stripe", actor="a", reason="moved")
        assert delete_team_facts(team=team) == {"facts": 2}
