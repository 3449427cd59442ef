"""A team's own settings (injection cap and budget, decay, hybrid weights, duplicate
threshold, freshness windows by type and by scope, captures straight to memory, conversation
retention, name): checked with the model's own limits, written field by field under the
row's lock, each change recorded in the audit trail.

The embedding profile is not here: switching it means re-embedding every entry, so it
goes through the re-index (search.services.request_profile_switch), which switches
the team only once the new vectors exist."""

from __future__ import annotations

import copy
import math
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from core.errors import Conflict, InvalidInput
from teams.models import AuditEvent, Team
from teams.services import record_event

EDITABLE_SETTINGS = (
    "name",
    "injection_max_entries",
    "injection_max_tokens",
    "decay_half_life_days",
    "hybrid_vector_weight",
    "hybrid_keyword_weight",
    "dedup_threshold",
    "freshness_context_days",
    "freshness_decision_days",
    "freshness_lesson_days",
    "freshness_reference_days",
    "freshness_historical_days",
    "freshness_identity_days",
    "freshness_confirmed_days",
    "capture_to_memory",
    "scope_window_team_days",
    "scope_window_project_days",
    "scope_window_user_days",
    "conversation_retention_days",
)


class SettingsChangedMeanwhile(Conflict):
    """Someone else changed the same setting since the page was loaded."""


def proposed_team(*, team: Team, changes: dict[str, Any]) -> Team:
    """An unsaved copy of `team` with `changes` applied and checked: what the previews
    run with. Raises InvalidInput naming the first field in error."""
    _check_names(changes)
    proposal = copy.copy(team)
    for name, value in changes.items():
        setattr(proposal, name, value)
    _validate(proposal)
    return proposal


def update_team_settings(
    *, team: Team, changes: dict[str, Any], by: str, seen: dict[str, Any] | None = None
) -> dict[str, tuple[Any, Any]]:
    """Apply `changes` (setting -> new value) and return what changed (old, new).

    `seen` holds the values the person saw when they chose the changes: a setting
    someone else changed meanwhile is refused (SettingsChangedMeanwhile) rather than
    overwritten; other settings changed meanwhile are kept, since only changed fields
    are written. One audit event lists every change."""
    _check_names(changes)
    with transaction.atomic():
        current = Team.objects.select_for_update().get(id=team.id)
        for name, value in (seen or {}).items():
            if (
                name in changes
                and getattr(current, name) != value
                and getattr(current, name) != changes[name]
            ):
                raise SettingsChangedMeanwhile(
                    f"someone else changed this setting meanwhile (now {getattr(current, name)}); "
                    "reload the page to see it",
                    field=name,
                )
        changed = {
            name: (getattr(current, name), value)
            for name, value in changes.items()
            if getattr(current, name) != value
        }
        if not changed:
            return {}
        for name, (_, new) in changed.items():
            setattr(current, name, new)
        _validate(current)
        current.save(update_fields=list(changed))
        record_event(
            team=current,
            actor=by,
            action=AuditEvent.Action.TEAM_SETTINGS,
            target="; ".join(
                f"{name}: {_shown(old)} → {_shown(new)}" for name, (old, new) in changed.items()
            ),
        )
    for name, (_, new) in changed.items():
        setattr(team, name, new)
    return changed


def _check_names(changes: dict[str, Any]) -> None:
    unknown = sorted(set(changes) - set(EDITABLE_SETTINGS))
    if unknown:
        raise InvalidInput(f"not a team setting: {', '.join(unknown)}", field=unknown[0])


def _validate(team: Team) -> None:
    """The model's validators and check constraints, plus what they cannot say."""
    if not isinstance(team.capture_to_memory, bool):
        raise InvalidInput("must be true or false", field="capture_to_memory")
    for name in ("decay_half_life_days", "hybrid_vector_weight", "hybrid_keyword_weight", "dedup_threshold"):
        value = getattr(team, name)
        # NaN passes every range comparison; infinity is no setting either.
        if not isinstance(value, int | float) or not math.isfinite(value):
            raise InvalidInput("must be a finite number", field=name)
    try:
        team.full_clean(exclude=["slug", "embedding_profile"], validate_unique=False)
    except ValidationError as error:
        name, messages = next(iter(error.message_dict.items()))
        raise InvalidInput(" ".join(messages), field=name if name != "__all__" else None) from None
    if team.hybrid_vector_weight == 0 and team.hybrid_keyword_weight == 0:
        raise InvalidInput(
            "at least one hybrid weight must be above 0, or every result scores 0",
            field="hybrid_vector_weight",
        )


def _shown(value: Any) -> str:
    return "never" if value is None else str(value)
