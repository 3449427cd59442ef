"""Dashboard forms. They parse and check input only; the rules live in the services,
whose domain errors the views attach back to the form's fields (`add_domain_error`).

Every field renders with a label, its help text and errors tied to the input by
aria-describedby, and aria-invalid when it has errors (templates/dashboard/_field.html).
"""

from __future__ import annotations

import uuid
from typing import Any

from django import forms

from core.errors import DomainError
from memories.facts.inputs import DOMAIN_PATTERN, SCOPE_PATTERN
from memories.models import MAX_NOTE_LENGTH
from memories.types import MemoryType
from memories.writes import MAX_REASON_LENGTH, SOFT_SUPERSEDE_REASON
from search.selectors import MAX_QUERY_CHARS, MAX_RESULTS
from teams.models import AgentToken, Membership
from teams.validators import KEY_PATTERN, validate_key

TYPE_CHOICES = [(t.value, t.label) for t in MemoryType]
STATE_CHOICES = [
    ("active", "Active"),
    ("superseded", "Superseded"),
    ("deleted", "Deleted"),
    ("all", "Any state"),
]
ROLE_CHOICES = Membership.Role.choices


class AccessibleForm(forms.Form):
    """Ties help text and errors to their input for screen readers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, field in self.fields.items():
            if field.help_text:
                field.widget.attrs["aria-describedby"] = f"{self[name].auto_id}_help"

    def full_clean(self) -> None:
        super().full_clean()
        for name in self.errors:
            if name in self.fields:
                self._mark_invalid(name)

    def _mark_invalid(self, name: str) -> None:
        attrs = self.fields[name].widget.attrs
        auto_id = self[name].auto_id
        described = [f"{auto_id}_errors"]
        if self.fields[name].help_text:
            described.append(f"{auto_id}_help")
        attrs["aria-invalid"] = "true"
        attrs["aria-describedby"] = " ".join(described)

    def add_domain_error(self, error: DomainError, default_field: str | None = None) -> None:
        """Show a service's refusal next to the field it is about (or on top)."""
        name = error.extra.get("field", default_field)
        if name not in self.fields:
            name = None
        self.add_error(name, error.detail)
        if name:
            self._mark_invalid(name)


def _tag_list(text: str) -> list[str]:
    return [t.strip().lstrip("#").lower() for t in text.split(",") if t.strip().lstrip("#")]


# --- memories ------------------------------------------------------------------


class MemoryFilterForm(AccessibleForm):
    q = forms.CharField(
        label="Search",
        required=False,
        max_length=MAX_QUERY_CHARS,
        widget=forms.TextInput(attrs={"type": "search", "placeholder": "words or a question"}),
        help_text="Uses the same hybrid search as the API; leave empty to list.",
    )
    type = forms.ChoiceField(label="Type", required=False, choices=[("", "Any type"), *TYPE_CHOICES])
    project = forms.CharField(
        label="Project",
        required=False,
        max_length=200,
        widget=forms.TextInput(attrs={"list": "project-names"}),
    )
    state = forms.ChoiceField(label="State", required=False, choices=STATE_CHOICES)
    tag = forms.CharField(
        label="Tags", required=False, max_length=500, help_text="Comma-separated; every tag must match."
    )

    def clean_state(self) -> str:
        return self.cleaned_data.get("state") or "active"

    def clean_tag(self) -> list[str]:
        return _tag_list(self.cleaned_data.get("tag") or "")


class MemoryCreateForm(AccessibleForm):
    key = forms.CharField(
        label="Key",
        max_length=200,
        validators=[validate_key],
        help_text="Letters, digits and . _ : @ -, e.g. deploy:friday-freeze.",
    )
    content = forms.CharField(label="Content", widget=forms.Textarea(attrs={"rows": 8}))
    type = forms.ChoiceField(label="Type", choices=TYPE_CHOICES, initial=MemoryType.CONTEXT)
    project = forms.CharField(
        label="Project", required=False, max_length=200, help_text="Optional: leave empty for team-wide."
    )
    tags = forms.CharField(
        label="Tags", required=False, max_length=500, help_text="Comma-separated, optional."
    )
    allow_duplicate = forms.BooleanField(
        label="Save even if another memory already holds this text",
        required=False,
        help_text="Without it, a text the team already has is not saved twice.",
    )

    def clean_tags(self) -> list[str]:
        return _tag_list(self.cleaned_data.get("tags") or "")


class MemorySupersedeForm(AccessibleForm):
    """An edit is a supersede: a new version with a reason; the old one stays in history."""

    KIND_CHOICES = [
        ("hard", "Correction: the meaning changes (a reason is required)"),
        ("soft", f"Minor correction: typo or wording (reason \u201c{SOFT_SUPERSEDE_REASON}\u201d)"),
    ]

    content = forms.CharField(label="Content", widget=forms.Textarea(attrs={"rows": 10}))
    type = forms.ChoiceField(label="Type", choices=TYPE_CHOICES)
    project = forms.CharField(label="Project", required=False, max_length=200)
    kind = forms.ChoiceField(
        label="Kind of change", choices=KIND_CHOICES, widget=forms.RadioSelect, initial="hard"
    )
    reason = forms.CharField(
        label="Reason",
        required=False,
        max_length=MAX_REASON_LENGTH,
        help_text="Why the memory changes; kept in the supersede history.",
    )
    base_version = forms.UUIDField(
        widget=forms.HiddenInput,
        error_messages={
            "required": "This form is out of date; reload the page and try again.",
            "invalid": "This form is out of date; reload the page and try again.",
        },
    )

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if data.get("kind") == "hard" and not (data.get("reason") or "").strip():
            self.add_error("reason", "Give a reason for the change, or choose minor correction.")
        return data

    def supersede_reason(self) -> str:
        if self.cleaned_data["kind"] == "soft":
            return SOFT_SUPERSEDE_REASON
        return self.cleaned_data["reason"].strip()


class UnsupersedeForm(AccessibleForm):
    reason = forms.CharField(
        label="Reason",
        max_length=MAX_REASON_LENGTH,
        help_text="Why the previous version is right after all.",
    )


class AnnotateForm(AccessibleForm):
    note = forms.CharField(label="Note", max_length=MAX_NOTE_LENGTH, widget=forms.Textarea(attrs={"rows": 3}))


class RateForm(AccessibleForm):
    direction = forms.ChoiceField(choices=[("up", "up"), ("down", "down")])


# --- search and injection --------------------------------------------------------


class SearchForm(AccessibleForm):
    MODE_CHOICES = [("hybrid", "Hybrid"), ("keyword", "Keyword only"), ("vector", "Vector only")]

    q = forms.CharField(
        label="Query",
        max_length=MAX_QUERY_CHARS,
        widget=forms.TextInput(attrs={"type": "search"}),
    )
    mode = forms.ChoiceField(label="Mode", choices=MODE_CHOICES, required=False)
    types = forms.MultipleChoiceField(
        label="Types", choices=TYPE_CHOICES, required=False, widget=forms.CheckboxSelectMultiple
    )
    project = forms.CharField(label="Project", required=False, max_length=200)
    max_results = forms.IntegerField(label="Results", min_value=1, max_value=MAX_RESULTS, required=False)
    include_superseded = forms.BooleanField(label="Include superseded versions", required=False)

    def clean_mode(self) -> str:
        return self.cleaned_data.get("mode") or "hybrid"

    def clean_max_results(self) -> int:
        return self.cleaned_data.get("max_results") or 10


class InjectionForm(AccessibleForm):
    project = forms.CharField(
        label="Project",
        required=False,
        max_length=200,
        help_text="Entries of this project plus team-wide ones; empty: every project.",
    )
    query = forms.CharField(
        label="Query",
        required=False,
        max_length=MAX_QUERY_CHARS,
        help_text="Optional: adds the best search results for it.",
    )
    max_entries = forms.IntegerField(label="Entry cap", required=False, min_value=1, max_value=200)
    max_tokens = forms.IntegerField(label="Token budget", required=False, min_value=50, max_value=100_000)


# --- vault, tokens, members, team ----------------------------------------------


class VaultSetForm(AccessibleForm):
    key = forms.CharField(label="Key", max_length=200, validators=[validate_key])
    value = forms.CharField(
        label="Value",
        strip=False,
        widget=forms.Textarea(attrs={"rows": 2, "autocomplete": "off", "spellcheck": "false"}),
    )
    is_secret = forms.BooleanField(
        label="Secret", required=False, initial=True, help_text="Encrypted at rest and never shown unmasked."
    )


class VaultRotateForm(AccessibleForm):
    value = forms.CharField(
        label="New value",
        strip=False,
        widget=forms.Textarea(attrs={"rows": 2, "autocomplete": "off", "spellcheck": "false"}),
    )


class TokenCreateForm(AccessibleForm):
    name = forms.CharField(label="Name", max_length=100, help_text="e.g. the agent or machine that uses it.")
    scopes = forms.MultipleChoiceField(
        label="Scopes",
        choices=AgentToken.Scope.choices,
        widget=forms.CheckboxSelectMultiple,
        initial=["read", "write"],
        help_text="admin includes write, write includes read.",
    )
    personal = forms.BooleanField(
        label="Mine only",
        required=False,
        help_text="Issued to you: it also reads and writes your personal entries (keys starting "
        "with @your-username), and can do no more than your role.",
    )


class MemberAddForm(AccessibleForm):
    username = forms.CharField(label="Username or e-mail", max_length=150)
    role = forms.ChoiceField(label="Role", choices=ROLE_CHOICES, initial=Membership.Role.MEMBER)
    create_account = forms.BooleanField(
        label="Create an account if none has this name or address",
        required=False,
        help_text="You get a one-time link to hand over; the new person sets a password with it.",
    )


class MemberRoleForm(AccessibleForm):
    role = forms.ChoiceField(label="Role", choices=ROLE_CHOICES)


class ShutdownForm(AccessibleForm):
    confirm = forms.CharField(label="Type the team's slug to confirm", max_length=63)

    def __init__(self, *args: Any, slug: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.slug = slug

    def clean_confirm(self) -> str:
        value = self.cleaned_data["confirm"].strip()
        if value != self.slug:
            raise forms.ValidationError("That is not this team's slug.")
        return value


def parse_version(value: str | None) -> uuid.UUID | None:
    try:
        return uuid.UUID(value) if value else None
    except ValueError:
        return None


class FactFilterForm(AccessibleForm):
    """The facts page's filters, checked as the API checks `GET facts/`'s."""

    entity = forms.RegexField(regex=KEY_PATTERN, label="Entity", required=False, max_length=200)
    domain = forms.RegexField(regex=DOMAIN_PATTERN, label="Domain", required=False, max_length=50)
    scope = forms.RegexField(
        regex=SCOPE_PATTERN,
        label="Scope",
        required=False,
        max_length=205,
        help_text="team, project:<name> or user:<username>",
    )
