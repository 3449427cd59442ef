"""Operator admin for memories: a read-only browser plus the supersede audit per (team, key).

Writes go through memories.writes only (they lock the key, scrub secrets and keep the
chain intact), so the admin never adds, changes or deletes a memory. Staff requests run
in the audited bypass scope set by teams.middleware.OperatorScopeMiddleware.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from memories.exceptions import MemoryNotFound
from memories.models import Annotation, Memory, MemoryState
from memories.selectors import memory_history, recent_history
from teams.models import Team


class MemoryStateFilter(admin.SimpleListFilter):
    """Memory.state, but in SQL so it filters the whole table rather than one page."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [(state, state) for state in MemoryState.values]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Memory]) -> QuerySet[Memory]:
        return queryset.in_state(self.value() or "all")  # type: ignore[attr-defined]


TEAM_AUDIT_ROWS = 200


def audit_url(*, team_id: int, key: str) -> str:
    return reverse("admin:memories_memory_audit", args=[team_id, key])


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    list_display = ["key", "team", "type", "state", "updated_by", "created_at", "index_state", "audit_link"]
    list_filter = ["team", "type", MemoryStateFilter, "index_state"]
    list_select_related = ["team"]
    search_fields = ["key", "content"]
    ordering = ["-created_at"]
    # Counting every match on a large table is slow; the paginator does without it.
    show_full_result_count = False
    fieldsets = [
        (None, {"fields": ["id", "team", "key", "type", "project", "content", "metadata"]}),
        ("Index", {"fields": ["index_state", "content_hash"]}),
        (
            "Audit",
            {
                "fields": [
                    "state",
                    "audit_link",
                    "created_at",
                    "updated_at",
                    "updated_by",
                    "supersedes",
                    "supersede_kind",
                    "supersede_reason",
                    "restored_from",
                    "deleted_at",
                    "deleted_by",
                ]
            },
        ),
        ("Quality signals", {"fields": ["access_count", "last_accessed_at", "upvotes", "downvotes"]}),
    ]
    readonly_fields = flatten_fieldsets(fieldsets)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Memory | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Memory | None = None) -> bool:
        return False

    @admin.display(description="state")
    def state(self, memory: Memory) -> str:
        return memory.state

    @admin.display(description="audit")
    def audit_link(self, memory: Memory) -> str:
        return format_html(
            '<a href="{}">supersede audit</a>', audit_url(team_id=memory.team_id, key=memory.key)
        )

    def get_urls(self) -> list[URLPattern]:
        # Before the default URLs: their `<path:object_id>/` would swallow this one.
        # `path:` because keys may contain . _ : @ -
        audit = path(
            "audit/<int:team_id>/<path:key>/",
            self.admin_site.admin_view(self.audit_view),
            name="memories_memory_audit",
        )
        team_audit = path(
            "audit/<int:team_id>/",
            self.admin_site.admin_view(self.team_audit_view),
            name="memories_memory_team_audit",
        )
        return [team_audit, audit, *super().get_urls()]

    def team_audit_view(self, request: HttpRequest, team_id: int) -> TemplateResponse:
        """A team's newest supersedes, unsupersedes and deletions, each linking to the
        audit of its key: the way into the supersede audit from a team."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        team = Team.objects.filter(pk=team_id).first()
        if team is None:
            raise Http404("no such team")
        rows = [
            {
                "at": e.at,
                "key": e.key,
                "kind": e.kind,
                "by": e.by,
                "why": e.reason,
                "url": audit_url(team_id=team.id, key=e.key),
            }
            for e in recent_history(team=team, limit=TEAM_AUDIT_ROWS, changes_only=True)
        ]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Supersede audit: team {team.slug}",
            "team": team,
            "rows": rows[:TEAM_AUDIT_ROWS],
            "limit": TEAM_AUDIT_ROWS,
            "team_memories_url": f"{reverse('admin:memories_memory_changelist')}?team__id__exact={team.id}",
        }
        return TemplateResponse(request, "admin/memories/team_audit.html", context)

    def audit_view(self, request: HttpRequest, team_id: int, key: str) -> TemplateResponse:
        """Every version of one (team, key), newest first: who changed it, when, why and how."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        team = Team.objects.filter(pk=team_id).first()
        if team is None:
            raise Http404("no such team")
        try:
            events = memory_history(team=team, key=key)
        except MemoryNotFound:
            raise Http404("no such memory") from None
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Supersede audit: {key}",
            "team": team,
            "key": key,
            "events": events,
            "team_memories_url": f"{reverse('admin:memories_memory_changelist')}?team__id__exact={team.id}",
        }
        return TemplateResponse(request, "admin/memories/supersede_audit.html", context)


ANNOTATION_FIELDS = ("id", "team", "memory", "note", "created_by", "created_at")


@admin.register(Annotation)
class AnnotationAdmin(admin.ModelAdmin):
    """Notes agents wrote on memories, read-only like the memories themselves."""

    list_display = ["memory_key", "team", "created_by", "created_at"]
    list_filter = ["team"]
    list_select_related = ["team", "memory"]
    search_fields = ["note", "memory__key"]
    ordering = ["-created_at"]
    show_full_result_count = False
    fields = ANNOTATION_FIELDS
    readonly_fields = ANNOTATION_FIELDS

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Annotation | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Annotation | None = None) -> bool:
        return False

    @admin.display(description="key", ordering="memory__key")
    def memory_key(self, annotation: Annotation) -> str:
        return annotation.memory.key
