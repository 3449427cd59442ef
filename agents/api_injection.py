"""The prompt injection API: one GET that renders the team's injection block.

Always JSON (one content type and one error shape for the whole API): the markdown is
in `text`; `format=json` adds the provenance of every entry, in or out."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.request import Request
from rest_framework.response import Response

from agents import injection
from agents.injection.relevant import RELEVANT_MAX
from agents.sessions import SESSION_HEADER, session_in_header
from core.api_errors import TEAM_SCOPED_ERRORS, error_responses
from core.built_fields import representation
from memories.types import MemoryType
from search.selectors import MAX_QUERY_CHARS
from teams.serializers import StrictCharField, StrictInputSerializer, StrictIntegerField
from teams.viewsets import TEAM_PATH_PARAMETER, TeamScopedViewSet


class QueryIntegerField(serializers.IntegerField):
    """A whole number written as plain digits: not `5.0`, `+5`, ` 5` or `1e2`."""

    def to_internal_value(self, data: Any) -> int:
        if not (isinstance(data, str) and data.isascii() and data.isdigit()):
            self.fail("invalid")
        return super().to_internal_value(data)


MAX_ENTRIES_HELP = "Entry cap (default: the team's); identity entries stay."
MAX_TOKENS_HELP = "Token budget (default: the team's)."


class _InjectionParameters(StrictInputSerializer):
    """What the block is built for, but the caps (typed as each door sends them)."""

    format = serializers.ChoiceField(
        choices=["markdown", "json"],
        default="markdown",
        help_text="json: also every entry in and out, with why.",
    )
    project = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=injection.MAX_PROJECT_CHARS,
        trim_whitespace=False,
        help_text="This project's and team-wide entries; empty: team-wide only.",
    )
    query = StrictCharField(
        required=False,
        max_length=MAX_QUERY_CHARS,
        help_text=f"Adds the top {RELEVANT_MAX} search results for it.",
    )

    def to_arguments(self) -> dict[str, Any]:
        """agents.injection.build_injection's arguments (but the team)."""
        data = self.validated_data
        return {name: data.get(name) for name in ("project", "query", "max_entries", "max_tokens")}


def _max_entries(field: type[serializers.IntegerField]) -> serializers.IntegerField:
    return field(
        required=False, min_value=1, max_value=injection.MAX_ENTRIES_LIMIT, help_text=MAX_ENTRIES_HELP
    )


def _max_tokens(field: type[serializers.IntegerField]) -> serializers.IntegerField:
    return field(
        required=False,
        min_value=injection.MIN_TOKENS,
        max_value=injection.MAX_TOKENS,
        help_text=MAX_TOKENS_HELP,
    )


class InjectionQuerySerializer(_InjectionParameters):
    """Query parameters. Unknown parameters are rejected, like unknown body fields."""

    max_entries = _max_entries(QueryIntegerField)
    max_tokens = _max_tokens(QueryIntegerField)


class InjectionArgumentsSerializer(_InjectionParameters):
    """The same parameters as JSON values (MCP's memory_context) rather than query strings."""

    max_entries = _max_entries(StrictIntegerField)
    max_tokens = _max_tokens(StrictIntegerField)


class InjectionEntrySerializer(serializers.Serializer):
    id = serializers.UUIDField(source="memory_id")
    key = serializers.CharField()
    type = serializers.ChoiceField(choices=MemoryType.choices)
    project = serializers.CharField(allow_blank=True)
    section = serializers.ChoiceField(
        choices=["core", "pinned", "skill", "relevant"],
        help_text="core: by type and recency; skill: an always-on skill; relevant: found by the query.",
    )
    rank = serializers.IntegerField(
        help_text="core and skill: position in the injection order (identity, always-on skills, lesson, "
        "then decisions newest first, then context newest first); relevant: position among the "
        "search results."
    )
    reason = serializers.ChoiceField(
        choices=["identity", "pinned", "skill", "ranked", "relevant"],
        help_text="identity: always in; skill: an always-on skill within the cap and the budget; ranked: "
        "within the cap and the budget; relevant: found by the query.",
    )
    tokens = serializers.IntegerField(help_text="Tokens of the rendered block.")
    created_at = serializers.DateTimeField()
    score = serializers.FloatField(required=False, help_text="Search score (relevant entries only).")
    content = serializers.CharField()

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data = super().to_representation(instance)
        if instance.score is None:
            data.pop("score")
        return data


class InjectionLeftOutSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="memory_id")
    key = serializers.CharField()
    type = serializers.ChoiceField(choices=MemoryType.choices)
    section = serializers.ChoiceField(choices=["core", "pinned", "skill", "relevant"])
    rank = serializers.IntegerField()
    reason = serializers.ChoiceField(
        choices=["cap", "budget"],
        help_text="cap: the entry cap was reached; budget: the block did not fit the tokens left.",
    )
    tokens = serializers.IntegerField(
        allow_null=True, help_text="Tokens of the block; null when the cap left it out unmeasured."
    )


class InjectionTokensSerializer(serializers.Serializer):
    used = serializers.IntegerField()
    budget = serializers.IntegerField()


class InjectionCountsSerializer(serializers.Serializer):
    candidates = serializers.IntegerField(
        help_text="Active identity, lesson, decision and context entries and always-on skills "
        "(in the project filter)."
    )
    included = serializers.IntegerField()
    included_relevant = serializers.IntegerField()
    included_facts = serializers.IntegerField(help_text="Facts in the block's Facts section.")
    left_out_cap = serializers.IntegerField()
    left_out_budget = serializers.IntegerField()
    left_out_unlisted = serializers.IntegerField(
        help_text="Left out and counted above, but not listed: past the first "
        f"max_entries + {injection.SCAN_BEYOND_CAP} entries of the order."
    )


class InjectionReviewSerializer(serializers.Serializer):
    id = serializers.UUIDField(help_text="The nudge's id, for POST nudges/{id}/resolve/.")
    kind = serializers.CharField()
    keys = serializers.ListField(child=serializers.CharField())
    message = serializers.CharField()


class InjectionSessionSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    agent = serializers.CharField()
    project = serializers.CharField(allow_blank=True)
    task = serializers.CharField(allow_blank=True)
    started_at = serializers.DateTimeField()


# One object, although the action is `list` (which would make the schema an array).
@extend_schema_serializer(many=False)
class InjectionOutputSerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=["markdown", "json"])
    text = serializers.CharField(help_text="The block, in markdown, ready to put in a prompt.")
    project = serializers.CharField(allow_null=True)
    max_entries = serializers.IntegerField()
    tokens = InjectionTokensSerializer()
    counts = InjectionCountsSerializer()
    search_mode = serializers.CharField(allow_null=True, help_text="Set when a query was given.")
    warnings = serializers.ListField(child=serializers.CharField())
    review = InjectionReviewSerializer(
        many=True,
        help_text='Open nudges in the block\'s "Please review" section (at most 3, within the budget).',
    )
    sessions = InjectionSessionSerializer(
        many=True,
        help_text='The other live sessions of the team in the block\'s "Other sessions now" section '
        "(at most 5, within the budget; never the caller's own X-MemoryHub-Session).",
    )
    entries = InjectionEntrySerializer(many=True, required=False, help_text="format=json: included entries.")
    left_out = InjectionLeftOutSerializer(
        many=True, required=False, help_text="format=json: left-out entries, in order, with why."
    )


def injection_payload(result: injection.Injection, output_format: str) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "format": output_format,
        "text": result.text,
        "project": result.project,
        "max_entries": result.max_entries,
        "tokens": {"used": result.tokens_used, "budget": result.token_budget},
        "counts": {
            "candidates": result.candidates,
            "included": len(result.included),
            "included_relevant": sum(1 for e in result.included if e.section == "relevant"),
            "included_facts": len(result.facts),
            "left_out_cap": result.count_left_out("cap"),
            "left_out_budget": result.count_left_out("budget"),
            "left_out_unlisted": result.left_out_unlisted,
        },
        "search_mode": result.search_mode,
        "warnings": result.warnings,
        "review": result.review,
        "sessions": result.sessions,
    }
    if output_format == "json":
        payload["entries"] = result.included
        payload["left_out"] = result.left_out
    return representation(InjectionOutputSerializer, payload)


class _IgnoreFormatParameter(DefaultContentNegotiation):
    """`format` is this endpoint's own parameter (markdown or json), not DRF's renderer
    override, which would answer 404 to format=markdown."""

    # drf-stubs type this as DRF's global settings object with URL_FORMAT_OVERRIDE a str, though
    # DRF documents None as turning the override off; only that one setting is read here.
    settings = SimpleNamespace(URL_FORMAT_OVERRIDE=None)  # type: ignore[assignment]


class InjectionViewSet(TeamScopedViewSet):
    content_negotiation_class = _IgnoreFormatParameter
    required_scopes: ClassVar[dict[str, str]] = {"list": "read"}
    replica_actions: ClassVar[frozenset[str]] = frozenset({"list"})

    @extend_schema(
        summary="Prompt injection block",
        description="What an agent should know at the start of a session: every active identity entry "
        "(never dropped), then always-on skills, then lessons, then decisions, then context, each newest "
        "first, within the entry cap and the token budget. Reference and historical entries are not injected "
        "(search finds them) unless they are always-on skills. "
        "With `query`, a relevant section adds the top search results. Always JSON: the markdown is in "
        '`text`; `format=json` adds every entry in and out, with why. The block ends with a "Please review" '
        "section of at most 3 open nudges (contradictions first), from what is left of the budget; "
        "`review` lists them. Then the team's other live sessions (who, which project, what task, since "
        "when; `sessions`). Nothing is modified.",
        parameters=[TEAM_PATH_PARAMETER, InjectionQuerySerializer],
        responses={200: InjectionOutputSerializer, **error_responses(*TEAM_SCOPED_ERRORS)},
    )
    def list(self, request: Request, team: str) -> Response:
        params = InjectionQuerySerializer(data=single_query_values(request))
        params.is_valid(raise_exception=True)
        result = injection.build_injection(
            team=self.get_team(),
            **params.to_arguments(),
            live=True,
            reader_session=session_in_header(request.headers.get(SESSION_HEADER, "")),
        )
        return Response(injection_payload(result, params.validated_data["format"]))


def single_query_values(request: Request) -> dict[str, str]:
    """The query parameters as a plain dict, so that an empty value is validated like
    any other (a QueryDict would make `max_entries=` count as absent); a parameter given
    twice is refused rather than resolved by guessing which one was meant."""
    repeated = sorted(name for name, values in request.query_params.lists() if len(values) > 1)
    if repeated:
        raise serializers.ValidationError({name: ["given more than once"] for name in repeated})
    return request.query_params.dict()
