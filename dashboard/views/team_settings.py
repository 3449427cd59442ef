"""The team settings page: every per-team setting with its meaning. Everyone in the
team reads them; admins change them, preview their effect first (the injection block
with the proposed cap and budget, a search with the proposed weights and half-life)
and switch the embedding profile, which goes through a re-index."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.db import models
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from agents.injection import build_injection
from core.errors import DomainError
from dashboard.access import Role, TeamAccess, forbidden, page_context, person_actor, team_page
from dashboard.forms import AccessibleForm
from search import selectors as search_selectors
from search import services as search_services
from search.run_search import embed_query
from search.selectors import MAX_QUERY_CHARS
from teams.models import Team
from teams.team_settings import EDITABLE_SETTINGS, proposed_team, update_team_settings

MEANINGS = {
    "name": ("Name", "How the team is shown in the dashboard. The slug in URLs and tokens does not change."),
    "injection_max_entries": (
        "Injection: most entries",
        "How many memories at most an agent receives at the start of a session "
        "(0: identity only; at most 200).",
    ),
    "injection_max_tokens": (
        "Injection: token budget",
        "How many tokens the injected block may take of the agent's prompt (50 to 100,000).",
    ),
    "decay_half_life_days": (
        "Search: decay half-life (days)",
        "A memory's search score halves every this many days since it was written; identity and lessons "
        "do not decay. 0 turns decay off.",
    ),
    "hybrid_vector_weight": (
        "Search: vector weight",
        "How much meaning-based (embedding) similarity counts in a hybrid search, from 0 to 1.",
    ),
    "hybrid_keyword_weight": (
        "Search: keyword weight",
        "How much matching words count in a hybrid search, from 0 to 1. At least one weight must be above 0.",
    ),
    "dedup_threshold": (
        "Duplicate threshold",
        "A new key whose content is at least this similar to an active memory is refused as a duplicate "
        "(above 0, at most 1; 1 means exact copies only).",
    ),
    "freshness_context_days": (
        "Freshness: context (days)",
        "A context memory unconfirmed this long is due for review; empty: never.",
    ),
    "freshness_decision_days": ("Freshness: decision (days)", "Same for decisions; empty: never."),
    "freshness_lesson_days": ("Freshness: lesson (days)", "Same for lessons; empty: never."),
    "freshness_reference_days": ("Freshness: reference (days)", "Same for references; empty: never."),
    "freshness_historical_days": (
        "Freshness: historical (days)",
        "Same for historical memories; empty: never.",
    ),
    "freshness_identity_days": ("Freshness: identity (days)", "Same for identity memories; empty: never."),
    "freshness_confirmed_days": (
        "Freshness: confirmed (days)",
        "A memory confirmed by two or more people or agents is due no sooner than this; empty: no minimum.",
    ),
    "capture_to_memory": (
        "Captures straight to memory",
        "Off (the default): what the coding-agent hooks capture (failed commands, the user's corrections) "
        "waits on the Review page as a draft. On: a capture that would have been a draft with no conflict "
        "is saved at once as a lesson marked auto-captured; a capture seen again confirms that entry.",
    ),
    "scope_window_team_days": (
        "Window: team scope (days)",
        "A team-wide memory is due for review within this many days at most, and its search score halves "
        "at least this often (the shorter of this and the type's window or the half-life); empty: no cap.",
    ),
    "scope_window_project_days": (
        "Window: project scope (days)",
        "The same for a memory of a project; empty: the team scope's window.",
    ),
    "scope_window_user_days": (
        "Window: personal scope (days)",
        "The same for a personal memory; empty: no cap.",
    ),
    "conversation_retention_days": (
        "Conversations: retention (days)",
        "Stored session transcripts older than this are deleted by the hourly retention job (1 to 3,650).",
    ),
}


def _setting_field(name: str) -> forms.Field:
    model_field = Team._meta.get_field(name)
    assert isinstance(model_field, models.Field)  # noqa: S101 (narrowing for mypy)
    form_field = model_field.formfield(
        label=MEANINGS[name][0], help_text=MEANINGS[name][1], show_hidden_initial=True
    )
    assert form_field is not None  # noqa: S101 (narrowing for mypy)
    return form_field


class TeamSettingsForm(AccessibleForm):
    """The fields come from the model (types, lengths); the model's limits are checked
    by the service (teams.team_settings), whose errors land on the field. Each field
    also posts the value shown (show_hidden_initial), so a setting someone else
    changed meanwhile is not overwritten."""

    def __init__(self, *args: Any, read_only: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in EDITABLE_SETTINGS:
            self.fields[name] = field = _setting_field(name)
            field.disabled = read_only
            # What AccessibleForm does for the fields it knows when it is built.
            field.widget.attrs["aria-describedby"] = f"{self[name].auto_id}_help"

    def seen(self) -> dict[str, Any]:
        """The values the person saw, for the settings they changed."""
        values = {}
        for name in self.changed_data:
            shown = self.data.get(self.add_initial_prefix(name))
            if shown is not None:
                values[name] = self.fields[name].to_python(shown)
        return values


class PreviewQueryForm(AccessibleForm):
    preview_query = forms.CharField(
        label="Search preview query",
        required=False,
        max_length=MAX_QUERY_CHARS,
        help_text="Optional: a query to run with the current and the proposed search settings.",
    )


class ProfileForm(AccessibleForm):
    embedding_profile = forms.ChoiceField(
        label="Embedding profile",
        help_text="The model that turns memories into vectors. Switching re-embeds every memory in the "
        "background; search keeps using the current vectors until the new ones are all there.",
    )

    def __init__(self, *args: Any, choices: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["embedding_profile"]
        assert isinstance(field, forms.ChoiceField)  # noqa: S101 (narrowing for mypy)
        field.choices = [(name, name) for name in choices]


def _initial(team: Team) -> dict[str, Any]:
    return {name: getattr(team, name) for name in EDITABLE_SETTINGS}


@team_page()
def team_settings(request: HttpRequest, access: TeamAccess) -> HttpResponse:
    team = access.team
    profiles = search_services.known_profiles()
    current_profile = search_services.team_profile(team)
    form = TeamSettingsForm(initial=_initial(team), read_only=not access.can_admin)
    query_form = PreviewQueryForm()
    profile_form = ProfileForm(initial={"embedding_profile": current_profile}, choices=profiles)
    preview: dict[str, Any] | None = None
    status = 200
    if request.method == "POST":
        if not access.can_admin:
            return forbidden(request, access, Role.ADMIN)
        action = request.POST.get("action", "save")
        if action == "switch_profile":
            profile_form = ProfileForm(request.POST, choices=profiles)
            status = 400
            if profile_form.is_valid():
                target = profile_form.cleaned_data["embedding_profile"]
                try:
                    count = search_services.request_profile_switch(
                        team=team, profile=target, actor=person_actor(request)
                    )
                except DomainError as error:
                    profile_form.add_domain_error(error, default_field="embedding_profile")
                else:
                    messages.success(
                        request,
                        f"Re-index of {count} memories with the profile \u201c{target}\u201d queued; "
                        "the team switches to it when every memory is embedded.",
                    )
                    return redirect(reverse("dashboard:team_settings", kwargs={"slug": team.slug}))
        else:
            form = TeamSettingsForm(request.POST, initial=_initial(team))
            query_form = PreviewQueryForm(request.POST)
            status = 400
            if form.is_valid() and query_form.is_valid():
                try:
                    if action == "preview":
                        preview = _preview(team, form.cleaned_data, query_form.cleaned_data["preview_query"])
                        status = 200
                    else:
                        changed = update_team_settings(
                            team=team,
                            changes={name: form.cleaned_data[name] for name in form.changed_data},
                            by=person_actor(request),
                            seen=form.seen(),
                        )
                        messages.success(
                            request,
                            f"Saved: {', '.join(MEANINGS[n][0] for n in changed)}."
                            if changed
                            else "Nothing changed.",
                        )
                        return redirect(reverse("dashboard:team_settings", kwargs={"slug": team.slug}))
                except DomainError as error:
                    form.add_domain_error(error)
    context = page_context(
        access,
        form=form,
        query_form=query_form,
        profile_form=profile_form,
        current_profile=current_profile,
        preview=preview,
    )
    return render(request, "dashboard/team_settings.html", context, status=status)


def _preview(team: Team, values: dict[str, Any], query: str) -> dict[str, Any]:
    """What the proposed settings would do, beside what the current ones do. Nothing
    is saved: the proposal is an unsaved copy of the team."""
    proposal = proposed_team(team=team, changes=values)
    preview: dict[str, Any] = {
        "injection_now": build_injection(team=team),
        "injection_proposed": build_injection(team=proposal),
        "query": query,
    }
    if query:
        embedding, warnings = embed_query(team=team, query=query)
        preview["search_warnings"] = warnings
        for label, settings_of in (("search_now", team), ("search_proposed", proposal)):
            preview[label] = search_selectors.search_memories(
                team=settings_of, query=query, embedding=embedding, max_results=10
            ).results
    return preview
