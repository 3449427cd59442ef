"""The tools of what a team keeps beside entries: learnings, skills and the vault."""

from __future__ import annotations

from typing import Any

from agents.mcp.tools.base import KeyArgument, Tool, ToolCall
from memories import learnings, skills, use_cases
from memories.api_learnings import LearningInputSerializer
from memories.serializers import detail_payload, saved_payload
from teams import services as team_services
from teams.serializers import StrictInputSerializer, StrictRegexField, VaultEntryInputSerializer


def learning_record(call: ToolCall, payload: LearningInputSerializer) -> dict[str, Any]:
    result = learnings.record_learning(team=call.team, updated_by=call.actor, **payload.to_arguments())
    return {**saved_payload(result.saved), "outcome": result.outcome}


LEARNING = Tool(
    name="learning_record",
    title="Record a learning",
    description=(
        "Record one thing learned (a claim about a topic) with how sure you are. The same claim "
        "about the same topic is the same learning: recording it again with another confidence, "
        "corroboration or verification makes a new version with the change as its reason, and an "
        "identical one changes nothing (`outcome`: created, superseded or unchanged). "
        "Errors: invalid, conflict (busy; retry), forbidden."
    ),
    arguments=LearningInputSerializer,
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=True,
    handler=learning_record,
)


class SkillArguments(StrictInputSerializer):
    """The skill REST names in the URL's path."""

    name = StrictRegexField(skills.SKILL_NAME_PATTERN, max_length=63, help_text="The skill's name.")


def skill_get(call: ToolCall, payload: SkillArguments) -> dict[str, Any]:
    memory = use_cases.load_skill(team=call.team, name=payload.validated_data["name"])
    return detail_payload(team=call.team, memory=memory)


SKILL = Tool(
    name="skill_get",
    title="Load a skill",
    description=(
        "Load a skill (a memory with a skill trigger) by its name, e.g. when a search result is "
        "marked `via_skill_trigger` or the injection block names it. Returns the entry in full. "
        "Errors: not_found, invalid."
    ),
    arguments=SkillArguments,
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=skill_get,
)


class VaultArguments(KeyArgument, VaultEntryInputSerializer):
    pass


def vault_set(call: ToolCall, payload: VaultArguments) -> dict[str, Any]:
    data = payload.validated_data
    entry, created = team_services.set_vault_entry(
        team=call.team,
        key=data["key"],
        value=data["value"],
        is_secret=data["is_secret"],
        actor=call.actor,
        may_change_secrets=True,  # the tool needs the admin scope
    )
    # Write-only: the vault is never readable over MCP, not even the value just set.
    return {
        "key": entry.key,
        "is_secret": entry.is_secret,
        "created": created,
        "updated_by": entry.updated_by,
        "updated_at": entry.updated_at.isoformat(),
    }


VAULT = Tool(
    name="vault_set",
    title="Set a vault entry",
    description=(
        "Store a team configuration value or secret (admin tokens only). A secret is encrypted and "
        "redacted from every answer the team gets; the vault cannot be read over MCP. Errors: "
        "invalid (a weak secret), quota_exceeded, forbidden."
    ),
    arguments=VaultArguments,
    scope="admin",
    read_only=False,
    destructive=True,
    idempotent=True,
    handler=vault_set,
)

TOOLS = (LEARNING, SKILL, VAULT)
