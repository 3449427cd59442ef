"""The dashboard's audit log, read-only for operators (staff requests run in the audited
bypass scope, see teams.middleware)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from memoryhub.dashboard.models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "team", "actor", "action", "target"]
    list_filter = ["team", "action"]
    list_select_related = ["team"]
    search_fields = ["actor", "target", "team__slug"]
    ordering = ["-created_at"]
    show_full_result_count = False
    fields = list_display
    readonly_fields = list_display

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AuditEvent | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: AuditEvent | None = None) -> bool:
        return False
