"""Formats checked at every boundary: URL, body, management command and database."""

from __future__ import annotations

import re

from django.core.validators import RegexValidator

from core.errors import InvalidInput

TEAM_SLUG_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
KEY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$"

_team_slug_re = re.compile(TEAM_SLUG_PATTERN)
_key_re = re.compile(KEY_PATTERN)

validate_team_slug = RegexValidator(
    _team_slug_re,
    "A team slug is 1-63 characters: lowercase letters, digits and '-', starting with a letter or digit.",
    code="invalid_slug",
)
validate_key = RegexValidator(
    _key_re,
    "A key is 1-200 characters: letters, digits and . _ : @ -, starting with a letter or digit.",
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
