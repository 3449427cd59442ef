"""Formats checked at every boundary: URL, body, management command and database."""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator

from core.errors import InvalidInput

TEAM_SLUG_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
# A key may start with `@`: `@<username>...` names a person's own entry (memories.personal).
KEY_PATTERN = r"^(@[A-Za-z0-9][A-Za-z0-9._:@-]{0,198}|[A-Za-z0-9][A-Za-z0-9._:@-]{0,199})$"

# Team settings' limits (teams.models.Team, the settings page). The injection ones are
# agents.injection's hard limits: a team setting never lifts them.
MAX_INJECTION_ENTRIES = 200
MIN_INJECTION_TOKENS, MAX_INJECTION_TOKENS = 50, 100_000
MAX_HALF_LIFE_DAYS = 36_500.0
MAX_FRESHNESS_DAYS = 3650
MAX_RETENTION_DAYS = 3650

_team_slug_re = re.compile(TEAM_SLUG_PATTERN)
_key_re = re.compile(KEY_PATTERN)

validate_team_slug = RegexValidator(
    _team_slug_re,
    "A team slug is 1-63 characters: lowercase letters, digits and '-', starting with a letter or digit.",
    code="invalid_slug",
)
validate_key = RegexValidator(
    _key_re,
    "A key is 1-200 characters: letters, digits and . _ : @ -, starting with a letter, a digit or @.",
    code="invalid_key",
)


def is_team_slug(value: str) -> bool:
    return bool(_team_slug_re.fullmatch(value))


def is_key(value: str) -> bool:
    return bool(_key_re.fullmatch(value))


def check_key(value: str) -> None:
    """The one key check of every service and API path: InvalidInput (400, field "key")
    with the rule spelled out. The database validator above says the same."""
    if not is_key(value):
        raise InvalidInput(str(validate_key.message), field="key")


def validate_dedup_threshold(value: float) -> None:
    """Above 0 and at most 1 (the team_dedup_threshold_range constraint): 1.0 is exact only."""
    if not 0 < value <= 1:
        raise ValidationError(
            "The duplicate threshold is a similarity above 0 and at most 1.", code="dedup_threshold_range"
        )
