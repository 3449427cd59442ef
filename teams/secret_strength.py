"""Which values may become vault secrets.

A secret becomes a redaction pattern for every text the team's responses carry, so a
short or common one would mangle ordinary text, and one that is part of the dashboard's
own markup (`name="csrfmiddlewaretoken"`, `hx-headers`) would be redacted wherever a page
shows that markup as text or as a value. The page redaction never touches markup
(dashboard.page_redaction); refusing such values when saved keeps them out of the
vault altogether. The checks compare a normalised form (NFKC, without invisible format
characters such as a zero-width space, case-folded), so `CSRFMIDDLEWARETOKEN` with a
zero-width space inside is the same word. Every check is linear in the value.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from pathlib import Path
from typing import Any

from django.conf import settings
from django.template import Context, Template

from core.errors import InvalidInput

MIN_SECRET_LENGTH = 8
COMMON_WORDS = frozenset(
    """
    password passwords username usernames required disabled readonly checked selected
    checkbox textarea fieldset function continue document template undefined response
    redirect register security settings password1 password2 12345678 123456789 1234567890
    qwertyuiop abcdefgh abcd1234 changeme letmein1 iloveyou sunshine football baseball
    welcome1 trustno1 superman princess starwars whatever midnight internet computer
    csrfmiddlewaretoken csrftoken sessionid hx-request x-csrftoken content-type
    stylesheet javascript text/html text/css application/json utf-8 charset viewport
    memoryhub dashboard memories memory injection overview history annotation annotations
    superseded supersede unsupersede identity decision reference historical
    autocomplete placeholder maxlength minlength novalidate aria-label aria-hidden
    aria-describedby data-testid tabindex onclick onsubmit accept-charset enctype
    multipart/form-data application/x-www-form-urlencoded redacted vault_secret
    """.split()  # noqa: SIM905 (a word list reads better as text)
)
# Tags and entities; each match stops at the next < or non-word character, so removing
# them is linear in the value's length.
_TAG = re.compile(r"<[^<>]*>")
_ENTITY = re.compile(r"&#?[A-Za-z0-9]+;")
_MARKUP_PUNCTUATION = "\"'<>/=&; \t\r\n"
_TOO_COMMON = (
    "this value is too common to be a secret (a common word, markup or a repeated character); "
    "redacting it would damage ordinary text. Store it with is_secret false, or choose a real secret."
)
_IN_MARKUP = (
    "this value is part of the dashboard's own page markup (a tag, an attribute or a form field name); "
    "as a secret it would be redacted wherever the pages show it. Store it with is_secret false, "
    "or choose a real secret."
)


def check_secret_strength(value: str) -> None:
    """Refuse (400, field "value") a secret that is short, a common word, nothing but
    markup, or part of the dashboard's own markup."""
    if len(value) < MIN_SECRET_LENGTH:
        raise InvalidInput(f"a secret is at least {MIN_SECRET_LENGTH} characters", field="value")
    normalised = _normalised(value)
    word = normalised.strip(_MARKUP_PUNCTUATION)
    only_markup = not _ENTITY.sub("", _TAG.sub("", normalised)).strip(_MARKUP_PUNCTUATION)
    if word in COMMON_WORDS or only_markup or len(set(normalised)) < 4:
        raise InvalidInput(_TOO_COMMON, field="value")
    if normalised in page_markup() or (len(word) >= MIN_SECRET_LENGTH and word in page_markup()):
        raise InvalidInput(_IN_MARKUP, field="value")


def _normalised(value: str) -> str:
    """NFKC, without format characters (zero-width spaces and joiners, BOMs), case-folded."""
    folded = unicodedata.normalize("NFKC", value)
    return "".join(c for c in folded if unicodedata.category(c) != "Cf").casefold()


@functools.cache
def page_markup() -> str:
    """The dashboard's own markup, case-folded: its templates' sources and the CSRF input
    Django renders into every form."""
    parts: list[str] = [str(Template("{% csrf_token %}").render(Context({"csrf_token": "token"})))]
    engine: dict[str, Any] = settings.TEMPLATES[0]
    for folder in engine["DIRS"]:
        parts += [path.read_text() for path in sorted(Path(folder).glob("dashboard/*.html"))]
    return "\n".join(parts).casefold()
