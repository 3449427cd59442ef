"""The operator's "re-index" action on teams: search owns indexing, so it extends the
team admin that teams registered (the admin's own way to add to another app's admin)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse

from search import services
from teams.admin import TeamAdmin
from teams.models import Team


class TeamAdminWithReindex(TeamAdmin):
    actions = ["reindex_teams", *TeamAdmin.actions]

    def has_reindex_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("teams.change_team")

    @admin.action(description="Re-index selected teams", permissions=["reindex"])
    def reindex_teams(self, request: HttpRequest, queryset: QuerySet[Team]) -> TemplateResponse | None:
        if request.POST.get("post") != "yes":
            return self.confirm_action(
                request,
                queryset,
                action="reindex_teams",
                title="Re-index teams",
                question="Re-chunk and re-embed every memory of these teams with their embedding profile?",
                button="Yes, re-index",
            )
        actor = f"admin:{request.user.get_username()}"
        for team in queryset:
            count = services.request_reindex(team=team, actor=actor, scope="all")
            self.message_user(
                request, f"Re-index of {team.slug} queued ({count} memories).", messages.SUCCESS
            )
        return None


admin.site.unregister(Team)
admin.site.register(Team, TeamAdminWithReindex)
