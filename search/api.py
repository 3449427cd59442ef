"""The search API: one POST that runs the hybrid pipeline for the token's team."""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from core.api_errors import BODY_ERRORS, TEAM_SCOPED_ERRORS, error_responses
from core.built_fields import FieldsBuiltOnce, representation
from memories.inputs import TYPE_HELP
from memories.serializers import AnnotationOutputSerializer, SupersededBySerializer
from memories.types import ACCEPTED_TYPE_NAMES, resolve_type, unknown_type_message
from search import run_search
from search.retrieval.results import SearchOutcome
from search.selectors import MAX_QUERY_CHARS, MAX_RESULTS
from teams.serializers import (
    StrictBooleanField,
    StrictCharField,
    StrictFloatField,
    StrictInputSerializer,
    StrictIntegerField,
)
from teams.viewsets import TEAM_PATH_PARAMETER, TeamScopedViewSet


class SearchInputSerializer(FieldsBuiltOnce, StrictInputSerializer):
    query = StrictCharField(max_length=MAX_QUERY_CHARS, help_text="What to look for, in plain words.")
    max_results = StrictIntegerField(
        min_value=1, max_value=MAX_RESULTS, default=5, help_text="How many results."
    )
    min_score = StrictFloatField(
        required=False,
        allow_null=True,
        min_value=0.0,
        max_value=1.0,
        help_text=(
            "Leave out results scoring lower. Left out, a hybrid search drops what matched nothing"
            " well (a relevance floor); 0 keeps every candidate."
        ),
    )
    types = serializers.ListField(
        child=StrictCharField(max_length=32),
        required=False,
        allow_empty=False,
        max_length=len(ACCEPTED_TYPE_NAMES),
        help_text=f"Only these types: {TYPE_HELP}.",
    )
    project = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="Only this project (and team-wide entries).",
    )
    include_superseded = StrictBooleanField(
        default=False,
        help_text="Replaced (superseded) versions too, each marked `superseded` and listed right after "
        "the current entry of its key. Without it a key appears once, as its current entry, ranked by "
        "the best match of any of its versions.",
    )
    include_archived = StrictBooleanField(
        default=False, help_text="Archived entries too (`is_active` false)."
    )
    tags = serializers.ListField(
        child=StrictCharField(max_length=64),
        required=False,
        max_length=10,
        help_text="Only entries with every one of these tags.",
    )
    people = serializers.ListField(
        child=StrictCharField(max_length=64),
        required=False,
        max_length=10,
        help_text="Only entries mentioning every one of these.",
    )
    topics = serializers.ListField(
        child=StrictCharField(max_length=64),
        required=False,
        max_length=10,
        help_text="Only entries about any one of these topics (the names extraction found, lowercase).",
    )
    explain = StrictBooleanField(default=False, help_text="Add how each score was made.")
    mode = serializers.ChoiceField(
        choices=["hybrid", "keyword", "vector"],
        default="hybrid",
        help_text="hybrid merges both paths; keyword or vector runs one of them.",
    )

    sources = serializers.ListField(
        child=serializers.ChoiceField(choices=list(run_search.SOURCES)),
        required=False,
        allow_empty=False,
        max_length=len(run_search.SOURCES),
        default=list(run_search.DEFAULT_SOURCES),
        help_text="What to search: `memories`, `facts` (by entity, key and value), `conversations` (their "
        "lines). Default memories and facts. Each gives at most `max_results`; all merge by score, "
        "each result naming its `origin`.",
    )

    def validate_sources(self, value: list[str]) -> list[str]:
        return [name for name in run_search.SOURCES if name in value]

    def validate_types(self, value: list[str]) -> list[str]:
        resolved = []
        for name in value:
            memory_type = resolve_type(name)
            if memory_type is None:
                raise serializers.ValidationError(unknown_type_message(name))
            resolved.append(memory_type.value)
        return sorted(set(resolved))

    def to_arguments(self) -> run_search.SearchArguments:
        return run_search.search_arguments(self.validated_data)


class ExplainSerializer(FieldsBuiltOnce, serializers.Serializer):  # type: ignore[type-arg]
    vector = serializers.FloatField(help_text="Cosine similarity of the best chunk, 0..1.")
    vector_relative = serializers.FloatField(
        required=False,
        help_text="Hybrid mode: the cosine placed in this query's band of cosines, 1 for the highest, 0 for "
        "the lowest (a band narrower than 0.25 counts as 0.25 wide).",
    )
    evidence = serializers.FloatField(
        required=False,
        help_text="Hybrid mode: this query's best w_vec * vector + w_kw * keyword (one value per query).",
    )
    keyword = serializers.FloatField(help_text="Full-text rank divided by this query's best rank, 0..1.")
    keyword_weight = serializers.FloatField(
        required=False,
        help_text="Hybrid mode, only for an identifier-like query (one or two words, one holding a digit, "
        "`_`, a camelCase capital or `-` `.` `:` `/` `@` inside) that the keyword path matched: the keyword "
        "path's weight for this query, the larger of the team's two (the vector path has the other).",
    )
    merged = serializers.FloatField(
        help_text="Hybrid mode: (w_vec * vector_relative + w_kw * keyword) * evidence; a single mode: that "
        "path's part."
    )
    entity = serializers.FloatField(
        help_text="0.05 per name or short quoted phrase of the query found exactly (case-sensitive, whole "
        "words) in the entry, at most 0.15; hybrid mode only, 0 otherwise."
    )
    decay = serializers.FloatField(help_text="0.5 ** (age / half-life); 1 for identity and lesson.")
    rating = serializers.FloatField(
        help_text="1 + 0.05 * clamp(upvotes - downvotes, -5, 5): 0.75..1.25, 1 when unrated. "
        "score = (merged + entity) * decay * rating."
    )
    mmr = serializers.FloatField(
        allow_null=True, help_text="λ * score - (1 - λ) * similarity to results above."
    )


class FactHitSerializer(FieldsBuiltOnce, serializers.Serializer):  # type: ignore[type-arg]
    entity = serializers.CharField()
    key = serializers.CharField()
    value = serializers.CharField()
    scope = serializers.CharField()
    sensitivity = serializers.CharField()


class ConversationHitSerializer(FieldsBuiltOnce, serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField(help_text="The conversation's id (GET conversations/<id>/).")
    title = serializers.CharField()
    session = serializers.CharField()
    first_line = serializers.IntegerField(help_text="The first line of the matching window (from 1).")
    last_line = serializers.IntegerField(help_text="Its last line: read them with `?lines=first-last`.")
    text = serializers.CharField(help_text="The window's lines, one `role: text` each.")


class SearchResultSerializer(FieldsBuiltOnce, serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField(
        source="memory_id", help_text="The memory version's id; a fact's, or a conversation's for those."
    )
    # A plain string in the schema: as an enum it would be a second name for the choice set of
    # the input's `sources`.
    origin = serializers.CharField(
        help_text="Which source it is from: memories, facts or conversations. A fact's `key` is "
        "`entity/key` and its `type` `fact`; a conversation's `key` is its title and its `type` "
        "`conversation`.",
    )
    fact = FactHitSerializer(required=False, help_text="A fact hit's entity, key and value.")
    conversation = ConversationHitSerializer(
        required=False, help_text="A conversation hit: its id, the line range and the matching text."
    )
    key = serializers.CharField()
    snippet = serializers.CharField()
    score = serializers.FloatField()
    type = serializers.CharField()
    is_active = serializers.BooleanField()
    # The API's field is named `source`. DRF's metaclass moves declared fields off the class, so
    # it never shadows Field.source at run time; the stubs cannot model that.
    source = serializers.CharField(  # type: ignore[assignment]
        help_text="Which paths found it: keyword, vector or keyword+vector; skill_trigger for a skill "
        "whose keyword is in the query."
    )
    via_skill_trigger = serializers.BooleanField(
        help_text="True for skills brought in by a keyword of theirs (listed first, score 1, not counted "
        "in max_results); false for the other results."
    )
    skill = serializers.CharField(required=False, help_text="The skill's name (skill results only).")
    matched_keyword = serializers.CharField(
        required=False, help_text="The skill keyword found in the query (skill results only)."
    )
    created_at = serializers.DateTimeField()
    superseded = serializers.BooleanField(
        help_text="True for a replaced version (only with include_superseded): it follows the current "
        "entry of its key, and `superseded_by` names the version that replaced it."
    )
    superseded_by = SupersededBySerializer(required=False, allow_null=True)
    rating = serializers.IntegerField(help_text="Net score of this version: upvotes - downvotes.")
    annotations = AnnotationOutputSerializer(
        many=True, help_text="The newest notes written on any version of this key, newest first."
    )
    explain = ExplainSerializer(required=False)

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data = super().to_representation(instance)
        if instance.superseded_by is None:
            data.pop("superseded_by")
        if instance.explain is None:
            data.pop("explain")
        if instance.fact is None:
            data.pop("fact")
        if instance.conversation is None:
            data.pop("conversation")
        if not instance.via_skill_trigger:
            data.pop("skill")
            data.pop("matched_keyword")
        return data


class SearchOutputSerializer(FieldsBuiltOnce, serializers.Serializer):  # type: ignore[type-arg]
    # A plain string in the schema: as an enum it would be a second name for the choice
    # set of the input's `mode` (a drf-spectacular warning, which `make test` fails on).
    search_mode = serializers.CharField(
        help_text="hybrid, keyword or vector: the paths that ran (keyword when vectors were unavailable)."
    )
    results = SearchResultSerializer(many=True)
    warnings = serializers.ListField(child=serializers.CharField())


def search_payload(outcome: SearchOutcome) -> dict[str, Any]:
    """A search's answer, as every door renders it."""
    return representation(SearchOutputSerializer, outcome)


class SearchViewSet(TeamScopedViewSet):
    # A search reads, whatever its verb.
    required_scopes: ClassVar[dict[str, str]] = {"create": "read"}
    replica_actions: ClassVar[frozenset[str]] = frozenset({"create"})

    @extend_schema(
        summary="Search memories, facts and conversations",
        description="`sources` picks what is searched (default memories and facts); each result names "
        "its `origin`, and the sources merge into one list by score (docs/search.md, Unified search): "
        "memory results keep their order among themselves. `high` facts are left out for read-only "
        "tokens. For memories: hybrid keyword and vector search with age decay, a small boost or "
        "penalty from "
        "ratings, and diversification. Falls back to keyword-only (search_mode: keyword) when no "
        "embeddings are available. Active skills with a keyword in the query (as a whole word or "
        "phrase) come first, at most 5, marked `via_skill_trigger`, on top of `max_results`; a skill "
        "with `projects` fires only when `project` is one of them. Every result returned counts as an "
        "access of that entry.",
        parameters=[TEAM_PATH_PARAMETER],
        request=SearchInputSerializer,
        responses={200: SearchOutputSerializer, **error_responses(*TEAM_SCOPED_ERRORS, *BODY_ERRORS)},
    )
    def create(self, request: Request, team: str) -> Response:
        payload = SearchInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        outcome = run_search.search_for(
            team=self.get_team(),
            arguments=payload.to_arguments(),
            may_see_high=self.get_token().grants("write"),
        )
        return Response(search_payload(outcome))
