"""The memory browser, the memory detail page and its actions (edit = supersede,
delete, unsupersede, annotate, rate). Every write goes through memories.writes."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from core.errors import DomainError
from dashboard import selectors
from dashboard.access import Role, TeamAccess, page_context, path_key, person_actor, team_page
from dashboard.forms import (
    AnnotateForm,
    MemoryCreateForm,
    MemoryFilterForm,
    MemorySupersedeForm,
    RateForm,
    UnsupersedeForm,
    parse_version,
)
from memories import feedback, writes
from memories import selectors as memory_selectors
from memories.exceptions import MemoryNotFound, StaleVersion
from memories.inputs import save_arguments
from memories.models import Memory
from memories.selectors import list_annotations
from memories.use_cases import save_entry
from search.run_search import search_arguments, search_for
from search.selectors import MAX_RESULTS

PAGE_SIZE = 25


def _detail_url(access: TeamAccess, key: str) -> str:
    return reverse("dashboard:memory", kwargs={"slug": access.team.slug, "key": key})


# --- browser ---------------------------------------------------------------------


@team_page()
def memory_list(request: HttpRequest, access: TeamAccess) -> HttpResponse:
    form = MemoryFilterForm(request.GET)
    status = 200
    # Search results, or the browse queryset the paginator slices without loading it all.
    rows: list[Any] | QuerySet[Memory] = []
    notes: list[str] = []
    search_mode: str | None = None
    if form.is_valid():
        data = form.cleaned_data
        if data["q"]:
            rows, search_mode, notes = _search_rows(access, data)
        else:
            rows = selectors.browse_memories(
                team=access.team,
                memory_type=data["type"] or None,
                project=data["project"] or None,
                state=data["state"],
                tags=data["tag"] or None,
            )
    else:
        status = 400
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = page_context(
        access,
        form=form,
        page=page,
        search_mode=search_mode,
        notes=notes,
        query_string=query.urlencode(),
        projects=selectors.list_projects(team=access.team),
    )
    template = "dashboard/memory_list.html"
    if getattr(request, "htmx", False):
        template = "dashboard/_memory_results.html"
    response = render(request, template, context, status=status)
    response["Vary"] = "HX-Request"
    return response


def _search_rows(access: TeamAccess, data: dict[str, Any]) -> tuple[list[Any], str | None, list[str]]:
    """The search pipeline's results, as rows for the browser, with notes to show."""
    if data["state"] == "deleted":
        return [], None, ["Search never returns deleted memories; clear the search box to list them."]
    arguments = search_arguments(
        {
            "query": data["q"],
            "max_results": MAX_RESULTS,
            "types": [data["type"]] if data["type"] else None,
            "project": data["project"] or None,
            "include_superseded": data["state"] != "active",
            "tags": data["tag"] or None,
        }
    )
    try:
        # A person browsing: no access counted (memories' access counts are agents' reads).
        outcome = search_for(team=access.team, arguments=arguments, count_access=False)
    except DomainError as error:
        return [], None, [error.detail]
    results = outcome.results
    if data["state"] == "superseded":
        results = [r for r in results if not r.is_active]
    return results, outcome.search_mode, outcome.warnings


# --- detail ------------------------------------------------------------------------


@team_page()
def memory_detail(request: HttpRequest, access: TeamAccess, key: str) -> HttpResponse:
    return _render_detail(request, access, key)


def _render_detail(
    request: HttpRequest,
    access: TeamAccess,
    key: str,
    *,
    annotate_form: AnnotateForm | None = None,
    status: int = 200,
) -> HttpResponse:
    path_key(key)
    story = selectors.key_story(
        team=access.team, key=key, older_than=parse_version(request.GET.get("older_than"))
    )
    shown = story.current or story.latest
    wanted = parse_version(request.GET.get("version"))
    if wanted is not None:
        shown = selectors.key_version(team=access.team, key=key, version_id=wanted)
    context = page_context(
        access,
        key=key,
        story=story,
        shown=shown,
        metadata_json=json.dumps(shown.metadata, indent=2, sort_keys=True) if shown.metadata else "",
        annotations=list(list_annotations(team=access.team, key=key)[:100]),
        annotate_form=annotate_form or AnnotateForm(),
        audit_url=(
            reverse("admin:memories_memory_audit", args=[access.team.id, key])
            if request.user.is_staff
            else ""
        ),
    )
    return render(request, "dashboard/memory_detail.html", context, status=status)


# --- writes ----------------------------------------------------------------------------


@team_page(Role.MEMBER)
def memory_create(request: HttpRequest, access: TeamAccess) -> HttpResponse:
    duplicate_of: Memory | None = None
    if request.method == "POST":
        form = MemoryCreateForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            arguments = save_arguments(
                {
                    "key": data["key"],
                    "content": data["content"],
                    "type": data["type"],
                    "project": data["project"],
                    "metadata": {"tags": data["tags"]} if data["tags"] else None,
                    "allow_duplicate": data["allow_duplicate"],
                }
            )
            try:
                result = save_entry(team=access.team, arguments=arguments, updated_by=person_actor(request))
            except DomainError as error:
                form.add_domain_error(error, default_field="key")
            else:
                if result.saved:
                    _report_save(request, result)
                    return redirect(_detail_url(access, result.memory.key))
                # Deduplication refused it: an active memory of the team holds this text.
                duplicate_of = result.memory
                form.add_domain_error(
                    DomainError(
                        f"Not saved: \u201c{duplicate_of.key}\u201d already holds this text. Open it, or "
                        "tick \u201cSave even if another memory already holds this text\u201d.",
                        field="content",
                    )
                )
        status = 400
    else:
        form = MemoryCreateForm(initial={"key": request.GET.get("key", "")})
        status = 200
    context = page_context(access, form=form, mode="create", duplicate_of=duplicate_of)
    return render(request, "dashboard/memory_form.html", context, status=status)


def _report_save(request: HttpRequest, result: writes.SaveResult) -> None:
    verb = "superseded" if result.superseded is not None else "saved"
    messages.success(request, f"Memory \u201c{result.memory.key}\u201d {verb}.")
    replaced = result.superseded
    if result.duplicate is not None and replaced is not None and replaced.key != result.memory.key:
        messages.info(
            request,
            f"It holds the text of \u201c{replaced.key}\u201d and more, so it superseded that shorter entry.",
        )
    if result.redactions:
        kinds = ", ".join(str(r["kind"]) for r in result.redactions)
        messages.warning(request, f"Credentials were redacted from the content ({kinds}).")
    if result.hint is not None:
        messages.info(request, f"Type hint: {result.hint.reason}.")


@team_page(Role.MEMBER)
def memory_edit(request: HttpRequest, access: TeamAccess, key: str) -> HttpResponse:
    path_key(key)
    current = memory_selectors.find_active_memory(team=access.team, key=key)
    if current is None:
        if not memory_selectors.key_was_saved(team=access.team, key=key):
            raise MemoryNotFound("no memory under this key")
        messages.info(request, "This memory is deleted; save it again to bring it back.")
        return redirect(reverse("dashboard:memory_create", kwargs={"slug": access.team.slug}) + f"?key={key}")
    status = 200
    if request.method == "POST":
        form = MemorySupersedeForm(request.POST)
        status = 400
        if form.is_valid():
            data = form.cleaned_data
            unchanged = (data["content"], data["type"], data["project"]) == (
                current.content,
                current.type,
                current.project,
            )
            if unchanged:
                form.add_error("content", "Nothing changed: edit the content, type or project.")
            else:
                arguments = save_arguments(
                    {
                        "key": key,
                        "content": data["content"],
                        "type": data["type"],
                        "project": data["project"],
                        "supersede_reason": form.supersede_reason(),
                        # Checked under the key's lock: two people editing at once cannot
                        # both replace the version they opened.
                        "expected_version": data["base_version"],
                    }
                )
                try:
                    result = save_entry(
                        team=access.team, arguments=arguments, updated_by=person_actor(request)
                    )
                except StaleVersion:
                    form.add_error(
                        None,
                        "Someone changed this memory since you opened it. Review the current version "
                        "(reload the page) before you change it.",
                    )
                except DomainError as error:
                    form.add_domain_error(error, default_field="content")
                else:
                    _report_save(request, result)
                    return redirect(_detail_url(access, key))
    else:
        form = MemorySupersedeForm(
            initial={
                "content": current.content,
                "type": current.type,
                "project": current.project,
                "base_version": current.id,
            }
        )
    context = page_context(access, form=form, mode="edit", key=key, current=current)
    return render(request, "dashboard/memory_form.html", context, status=status)


@team_page(Role.MEMBER)
def memory_delete(request: HttpRequest, access: TeamAccess, key: str) -> HttpResponse:
    current = memory_selectors.get_active_memory(team=access.team, key=path_key(key))
    if request.method == "POST":
        writes.delete_memory(team=access.team, key=key, deleted_by=person_actor(request))
        messages.success(request, f"Memory \u201c{key}\u201d deleted. Its history is kept.")
        return redirect(_detail_url(access, key))
    return render(request, "dashboard/memory_delete.html", page_context(access, key=key, current=current))


@team_page(Role.MEMBER)
def memory_unsupersede(request: HttpRequest, access: TeamAccess, key: str) -> HttpResponse:
    current = memory_selectors.get_active_memory(team=access.team, key=path_key(key))
    previous = memory_selectors.replaced_version(team=access.team, memory=current)
    status = 200
    form = UnsupersedeForm(request.POST or None)
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                writes.unsupersede_memory(
                    team=access.team,
                    key=key,
                    reason=form.cleaned_data["reason"],
                    updated_by=person_actor(request),
                )
            except DomainError as error:
                form.add_domain_error(error, default_field="reason")
            else:
                messages.success(request, f"The previous version of \u201c{key}\u201d is active again.")
                return redirect(_detail_url(access, key))
    context = page_context(access, form=form, key=key, current=current, previous=previous)
    return render(request, "dashboard/memory_unsupersede.html", context, status=status)


@team_page(Role.MEMBER)
@require_POST
def memory_annotate(request: HttpRequest, access: TeamAccess, key: str) -> HttpResponse:
    path_key(key)
    form = AnnotateForm(request.POST)
    if form.is_valid():
        try:
            result = feedback.annotate_memory(
                team=access.team, key=key, note=form.cleaned_data["note"], created_by=person_actor(request)
            )
        except MemoryNotFound:
            form.add_error("note", "Only the active version of a memory can be annotated.")
        except DomainError as error:
            form.add_domain_error(error, default_field="note")
        else:
            messages.success(request, "Note added.")
            if result.redactions:
                messages.warning(request, "Credentials were redacted from the note.")
            return redirect(_detail_url(access, key) + "#notes")
    return _render_detail(request, access, key, annotate_form=form, status=400)


@team_page(Role.MEMBER)
@require_POST
def memory_rate(request: HttpRequest, access: TeamAccess, key: str) -> HttpResponse:
    path_key(key)
    form = RateForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Rate a memory up or down.")
        return redirect(_detail_url(access, key))
    try:
        feedback.rate_memory(
            team=access.team,
            key=key,
            direction=form.cleaned_data["direction"],
            rated_by=person_actor(request),
        )
    except MemoryNotFound:
        messages.error(request, "Only the active version of a memory can be rated.")
    else:
        messages.success(request, "Thanks, rating recorded.")
    return redirect(_detail_url(access, key))
