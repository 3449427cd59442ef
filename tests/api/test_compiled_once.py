"""What a read reuses between requests: a query's SQL compiled once per process
(core.compiled_once) and a serializer's fields worked out once per class
(core.built_fields). Both must give exactly what building them anew gives."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from rest_framework import serializers

import agents.api_sessions  # noqa: F401 (defines serializers that use FieldsBuiltOnce)
import freshness.api
import freshness.api_anchors
import freshness.api_drafts  # noqa: F401
import memories.serializers
import search.api  # noqa: F401
from core.built_fields import FieldsBuiltOnce, representation
from core.compiled_once import CompiledOnce
from memories.entry_read import ACTIVE_ENTRY
from memories.facts.serializers import FactOutputSerializer
from memories.facts.services import set_fact
from memories.models import Memory
from memories.selectors import find_active_memory_query
from teams.authentication import TEAM_ROW
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import Agent


def _subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


@pytest.mark.parametrize("serializer_class", _subclasses(FieldsBuiltOnce), ids=lambda cls: cls.__name__)
def test_fields_built_once_are_the_fields_the_class_gives(serializer_class: type) -> None:
    first = serializer_class(context={}).get_fields()
    again = serializer_class(context={}).get_fields()
    # What the serializer's own class (ModelSerializer or Serializer) gives, built anew.
    built_anew = super(FieldsBuiltOnce, serializer_class(context={})).get_fields()
    # A field's repr names its class and every argument it was made with.
    assert {name: repr(field) for name, field in first.items()} == {
        name: repr(field) for name, field in built_anew.items()
    }
    assert list(again) == list(built_anew)
    assert all(again[name] is not first[name] for name in first)


def test_each_serializer_binds_fields_of_its_own() -> None:
    one, other = memories.serializers.MemoryOutputSerializer(), memories.serializers.MemoryOutputSerializer()
    assert one.fields["key"] is not other.fields["key"]
    assert one.fields["key"].parent is one and other.fields["key"].parent is other


@pytest.mark.django_db
def test_a_reused_serializer_answers_what_a_new_one_does_in_every_thread(team: Team) -> None:
    with team_scope(team.id):
        facts = [
            set_fact(
                team=team, entity=f"service-{n}", key="owner", value=f"team {n}", actor="a", domains=[str(n)]
            ).fact
            for n in range(40)
        ]
    expected = [dict(FactOutputSerializer(fact).data) for fact in facts]
    with ThreadPoolExecutor(max_workers=4) as pool:
        rendered = list(pool.map(lambda fact: representation(FactOutputSerializer, fact), facts * 5))
    assert rendered == expected * 5
    assert rendered[0]["value"] == "team 0" and rendered[39]["domains"] == ["39"]


@pytest.mark.django_db
def test_a_reused_serializer_renders_with_each_calls_own_context(member: Agent, save: Any) -> None:
    first = save(member, "deploy-day", "Deploys happen on Tuesdays.")
    save(member, "deploy-day", "Deploys happen on Wednesdays.", supersede_reason="moved")
    team = member.team
    with team_scope(team.id):
        old = Memory.objects.get(id=first["id"])
        old.team = team
        successor = {"id": "the-next", "key": "deploy-day"}
        contexts = [
            {"successors": {old.id: successor}, "annotations": {}},
            {"successors": {}, "annotations": {}},
        ]
        for context in contexts * 3:
            expected = dict(
                memories.serializers.MemoryDetailOutputSerializer(old, context=dict(context)).data
            )
            assert (
                representation(memories.serializers.MemoryDetailOutputSerializer, old, dict(context))
                == expected
            )
        shown = representation(memories.serializers.MemoryDetailOutputSerializer, old, dict(contexts[0]))
        assert shown["superseded_by"] == successor
        assert representation(memories.serializers.MemoryDetailOutputSerializer, old)["superseded_by"] is None


class _Node(serializers.Serializer):  # type: ignore[type-arg]
    name = serializers.CharField()
    child = serializers.SerializerMethodField()

    def get_child(self, node: dict[str, Any]) -> dict[str, Any] | None:
        return representation(_Node, node["child"], self.context) if node.get("child") else None


def test_a_serializer_that_renders_its_own_class_inside_gets_a_second_one() -> None:
    tree = {"name": "a", "child": {"name": "b", "child": {"name": "c"}}}
    nested = {"name": "a", "child": {"name": "b", "child": {"name": "c", "child": None}}}
    assert representation(_Node, tree) == nested
    assert representation(_Node, tree) == nested


@pytest.mark.django_db
def test_a_compiled_query_is_the_queryset_with_the_callers_values(member: Agent, save: Any) -> None:
    save(member, "deploy-day", "Deploys happen on Tuesdays.")
    save(member, "other", "Something else.")
    team = member.team
    for key in ("deploy-day", "other", "missing", "it's %s; DROP"):
        sql, params = ACTIVE_ENTRY.sql_with_params(team_id=team.id, key=key)
        expected_sql, expected_params = find_active_memory_query(team=team, key=key).query.sql_with_params()
        assert (sql, params) == (expected_sql, list(expected_params))
    with team_scope(team.id):
        assert TEAM_ROW.first(team_id=team.id) == Team.objects.get(id=team.id)
        assert TEAM_ROW.first(team_id=-1) is None
        compiled = CompiledOnce(lambda key: Memory.objects.filter(key=key, is_active=True), key=str)
        assert compiled.first(key="deploy-day").content == "Deploys happen on Tuesdays."


def test_a_value_the_query_transforms_is_refused_when_compiled() -> None:
    # `__icontains` wraps the value in %...%: no parameter holds it unchanged.
    transformed = CompiledOnce(lambda key: Memory.objects.filter(key__icontains=key), key=str)
    with pytest.raises(ValueError, match="does not reach"):
        transformed.sql_with_params(key="x")
    with pytest.raises(TypeError):
        CompiledOnce(lambda when: Memory.objects.filter(created_at=when), when=float).sql_with_params(
            when=1.0
        )


def test_a_constant_of_the_query_keeps_its_place() -> None:
    compiled = CompiledOnce(
        lambda team_id: Memory.objects.filter(team_id=team_id, access_count=1), team_id=int
    )
    assert [int(value) for value in compiled.sql_with_params(team_id=7)[1]] == [1, 7]
    assert [int(value) for value in compiled.sql_with_params(team_id=1)[1]] == [1, 1]


@pytest.mark.django_db
@pytest.mark.parametrize("may_see_high", [True, False])
def test_the_compiled_fact_lookup_is_the_selectors_query(member: Agent, may_see_high: bool) -> None:
    from memories.facts.models import Fact
    from memories.facts.selectors import _ACTIVE_FACT, _fact_query

    team_id = member.team.id
    compiled = _ACTIVE_FACT[may_see_high].sql_with_params(team_id=team_id, entity="alpha", key="editor")
    expected_sql, expected_params = _fact_query(
        Fact.objects.for_team(team_id).active(), may_see_high, "alpha", "editor"
    ).query.sql_with_params()
    assert compiled == (expected_sql, list(expected_params))
