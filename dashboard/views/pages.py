"""The team picker and the read pages: overview, search playground, injection preview
and live agent sessions (plus the overview's re-index button)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from agents.injection import build_injection
from agents.sessions import list_live_sessions, session_status, session_ttl
from core.errors import DomainError
from dashboard import charts, selectors
from dashboard.access import Role, TeamAccess, page_context, person_actor, signed_in_user_id, team_page
from dashboard.forms import InjectionForm, SearchForm
from memories.models import IndexState
from search import services as search_services
from search.retrieval.mmr import MMR_LAMBDA
from search.retrieval.results import SearchResult
from search.run_search import search_arguments, search_for


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The team picker: the teams the signed-in person belongs to, and nothing else."""
    memberships = selectors.list_user_memberships(user_id=signed_in_user_id(request))
    return render(request, "dashboard/home.html", {"memberships": memberships})


@team_page()
def overview(request: HttpRequest, access: TeamAccess) -> HttpResponse:
    team = access.team
    counts = selectors.memory_counts(team=team)
    per_day = selectors.writes_per_day(team=team, days=30)
    confirmed_weekly = selectors.confirmations_per_week(team=team, weeks=12)
    injection = build_injection(team=team)
    health = selectors.index_health(team=team)
    context = page_context(
        access,
        counts=counts,
        totals={
            "active": sum(c.active for c in counts),
            "superseded": sum(c.superseded for c in counts),
            "deleted": sum(c.deleted for c in counts),
        },
        health=health,
        stuck=health[IndexState.PENDING] + health[IndexState.FAILED],
        failed_entries=selectors.failed_index_entries(team=team),
        injection=injection,
        token_share=_share(injection.tokens_used, injection.token_budget),
        entry_share=_share(len(injection.included), injection.max_entries),
        changes=selectors.recent_changes(team=team, limit=10),
        writes_chart=charts.daily_columns(per_day),
        writes_total=sum(n for _, n in per_day),
        types_chart=charts.horizontal_bars([(c.type, c.active) for c in counts]),
        freshness=selectors.freshness_counts(team=team),
        job_runs=selectors.freshness_job_runs(team=team),
        confirmations_chart=charts.daily_columns(confirmed_weekly),
        confirmations_total=sum(n for _, n in confirmed_weekly),
    )
    return render(request, "dashboard/overview.html", context)


def _share(used: int, cap: int) -> int:
    return min(100, round(100 * used / cap)) if cap else 100


@team_page(Role.ADMIN)
@require_POST
def reindex(request: HttpRequest, access: TeamAccess) -> HttpResponse:
    scope = request.POST.get("scope", "stuck")
    try:
        count = search_services.request_reindex(team=access.team, actor=person_actor(request), scope=scope)  # type: ignore[arg-type]
    except DomainError as error:
        messages.error(request, error.detail)
    else:
        if scope == "all":
            messages.success(request, f"Re-index of all {count} memories queued.")
        else:
            messages.success(request, f"Indexing queued for {count} pending or failed memories.")
    return redirect("dashboard:overview", slug=access.team.slug)


# --- search playground -----------------------------------------------------------

# The three bars a result leads with, each 0..1: the parts of its score a person reads
# at a glance. The formula's every part is folded under them (FORMULA_PARTS).
LEAD_BARS = [
    ("vector", "Meaning", "how close the query and the entry are in meaning (cosine of the best chunk)"),
    ("keyword", "Words", "how well the query's words match, relative to the best keyword match"),
    ("decay", "Freshness", "halves every half-life of age; identity and lesson are exempt"),
]
# Hybrid results have every part; a single mode has no vector_relative or evidence.
FORMULA_PARTS = [
    ("vector", "Vector", "cosine similarity of the query and the best chunk"),
    ("vector_relative", "Vector, relative", "the cosine within this query's band: 1 for its highest"),
    ("keyword", "Keyword", "full-text rank, relative to the best keyword match"),
    ("evidence", "Evidence", "this query's best weighted sum; it scales every result alike"),
    ("keyword_weight", "Keyword weight", "identifier-like query: the keyword path leads, larger weight"),
    ("merged", "Merged", "relative vector and keyword, by the team's hybrid weights, times the evidence"),
    ("entity", "Names", "0.05 per name or quoted phrase of the query found exactly, at most 0.15"),
    ("decay", "Decay", "halves every half-life; identity and lesson are exempt"),
    ("rating", "Rating", "1 + 0.05 per net vote, within 0.75..1.25"),
    ("mmr", "MMR", "relevance minus redundancy with results above it"),
]


@team_page()
def search(request: HttpRequest, access: TeamAccess) -> HttpResponse:
    form = SearchForm(request.GET or None)
    outcome, rows, status = None, [], 200
    if form.is_bound and form.is_valid():
        data = form.cleaned_data
        arguments = search_arguments(
            {
                "query": data["q"],
                "max_results": data["max_results"],
                "types": data["types"] or None,
                "project": data["project"] or None,
                "include_superseded": data["include_superseded"],
                "mode": data["mode"],
                "explain": True,
            }
        )
        try:
            # A person browsing: no access counted (memories' access counts are agents' reads).
            outcome = search_for(team=access.team, arguments=arguments, count_access=False)
        except DomainError as error:
            form.add_domain_error(error, default_field="q")
            status = 400
        else:
            rows = result_rows(outcome.results)
    elif form.is_bound:
        status = 400
    context = page_context(access, form=form, outcome=outcome, rows=rows)
    template = "dashboard/search.html"
    if getattr(request, "htmx", False):
        template = "dashboard/_search_results.html"
    response = render(request, template, context, status=status)
    response["Vary"] = "HX-Request"
    return response


def result_rows(results: list[SearchResult]) -> list[dict[str, Any]]:
    """The results in the order the search ranked them, each with its rank, the score
    that put it there (`rank_score`), its three lead bars and its formula's parts."""
    rows = []
    for rank, (result, score) in enumerate(zip(results, rank_scores(results), strict=True), start=1):
        explain = result.explain or {}
        rows.append(
            {
                "result": result,
                "rank": rank,
                "rank_score": score,
                "bars": _bars(explain, LEAD_BARS),
                "parts": _bars(explain, FORMULA_PARTS),
            }
        )
    return rows


def rank_scores(results: list[SearchResult]) -> list[float]:
    """The score that set each result's place, so that the page reads top-down: its
    relevance (`score`) less the penalty diversification gave it for repeating a result
    above (MMR's value divided by λ; 0 for the first), never above the result before it
    (a replaced version follows the current entry of its key)."""
    scores: list[float] = []
    for result in results:
        mmr = (result.explain or {}).get("mmr")
        score = result.score if mmr is None else max(0.0, mmr / MMR_LAMBDA)
        scores.append(round(min(score, scores[-1]) if scores else score, 6))
    return scores


def _bars(explain: dict[str, Any], parts: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    """One bar per part in `parts` that `explain` has (a skill result has none: its
    bars are empty)."""
    bars = []
    for name, label, meaning in parts:
        value = explain.get(name)
        if value is None and parts is FORMULA_PARTS:
            continue
        top = 1.25 if name == "rating" else 1.0
        bars.append(
            {
                "name": name,
                "label": label,
                "meaning": meaning,
                "value": value,
                "percent": 0.0 if value is None else round(100 * max(0.0, min(value, top)) / top, 1),
            }
        )
    return bars


# --- injection preview -------------------------------------------------------------


@team_page()
def injection(request: HttpRequest, access: TeamAccess) -> HttpResponse:
    form = InjectionForm(request.GET or None)
    result, status = None, 200
    if not form.is_bound or form.is_valid():
        data = form.cleaned_data if form.is_bound else {}
        try:
            result = build_injection(
                team=access.team,
                project=data.get("project") or None,
                query=data.get("query") or None,
                max_entries=data.get("max_entries"),
                max_tokens=data.get("max_tokens"),
                live=True,
            )
        except DomainError as error:
            form.add_domain_error(error)
            status = 400
    else:
        status = 400
    context = page_context(
        access,
        form=form,
        result=result,
        token_share=_share(result.tokens_used, result.token_budget) if result else 0,
    )
    return render(request, "dashboard/injection.html", context, status=status)


# --- agent sessions ------------------------------------------------------------------


@team_page()
def sessions(request: HttpRequest, access: TeamAccess) -> HttpResponse:
    live = list(list_live_sessions(team=access.team).select_related("token")[:200])
    rows = [{"session": s, "status": session_status(s)} for s in live]
    context = page_context(access, rows=rows, ttl_seconds=int(session_ttl().total_seconds()))
    template = "dashboard/sessions.html"
    if getattr(request, "htmx", False):
        template = "dashboard/_sessions_table.html"
    response = render(request, template, context)
    response["Vary"] = "HX-Request"
    return response
