"""The facts page: the team's active facts, filtered by entity, domain and scope, with
`high` values masked until a member reveals one (recorded in the audit log, as a vault
secret's reveal is). Viewers see the list, masked, and may not reveal: as a read-only
token never gets a `high` fact."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from dashboard.access import Role, TeamAccess, page_context, path_key, person_actor, team_page
from dashboard.forms import FactFilterForm
from memories.facts import selectors, services
from memories.facts.models import Fact

PAGE_SIZE = 50


@team_page()
def fact_list(request: HttpRequest, access: TeamAccess) -> HttpResponse:
    form = FactFilterForm(request.GET)
    status = 200
    rows: QuerySet[Fact] | list[Fact] = []
    if form.is_valid():
        data = form.cleaned_data
        rows = selectors.list_facts(
            team_id=access.team.id,
            # Listed (masked) so they can be found by entity and key; revealed one at a time.
            may_see_high=True,
            entity=data["entity"] or None,
            domain=data["domain"] or None,
            scope=data["scope"] or None,
        ).order_by("entity", "key")
    else:
        status = 400
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = page_context(access, form=form, page=page, query_string=query.urlencode())
    return render(request, "dashboard/facts.html", context, status=status)


@team_page(Role.MEMBER)
@require_POST
@never_cache
def fact_reveal(request: HttpRequest, access: TeamAccess, entity: str, key: str) -> HttpResponse:
    """POST only (no prefetch or history can trigger it), never cached, audited first."""
    fact = services.reveal_fact(
        team=access.team, entity=path_key(entity), key=path_key(key), actor=person_actor(request)
    )
    return render(request, "dashboard/fact_reveal.html", page_context(access, fact=fact))
