from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from freshness.models import JobRun


@admin.register(JobRun)
class JobRunAdmin(admin.ModelAdmin):
    """What the beat jobs did, run by run (their schedule: Periodic tasks)."""

    list_display = ("job", "started_at", "finished_at", "succeeded", "outcome", "error")
    list_filter = ("job", "succeeded")
    ordering = ("-started_at",)
    readonly_fields = ("job", "started_at", "finished_at", "succeeded", "outcome", "error")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: JobRun | None = None) -> bool:
        return False
