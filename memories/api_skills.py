"""The skills API: load the active entry that carries a skill, by the skill's name."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from core.api_errors import TEAM_SCOPED_ERRORS, error_responses
from core.errors import InvalidInput
from memories import skills, use_cases
from memories.serializers import MemoryDetailOutputSerializer, detail_payload
from teams.viewsets import TEAM_PATH_PARAMETER, TeamScopedViewSet

SKILL_NAME_PATH_PARAMETER = OpenApiParameter(
    "name", str, OpenApiParameter.PATH, pattern=skills.SKILL_NAME_PATTERN, description="The skill's name."
)


class SkillViewSet(TeamScopedViewSet):
    lookup_field = "name"
    lookup_value_regex = "[^/]+"

    @extend_schema(
        summary="Load a skill",
        description="The active entry whose `skill_trigger` has this name, with the notes of its key. "
        "A superseded or deleted skill is not found (404). Counts as an access of the entry.",
        parameters=[TEAM_PATH_PARAMETER, SKILL_NAME_PATH_PARAMETER],
        responses={200: MemoryDetailOutputSerializer, **error_responses(*TEAM_SCOPED_ERRORS)},
    )
    def retrieve(self, request: Request, team: str, name: str) -> Response:
        if not skills.is_skill_name(name):
            raise InvalidInput("malformed skill name", field="name")
        # Loading a skill hands it to an agent: an access, shown in the answer too.
        memory = use_cases.load_skill(team=self.get_team(), name=name)
        return Response(detail_payload(team=self.get_team(), memory=memory))
