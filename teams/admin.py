"""Operator admin for teams, agent tokens and the vault.

Staff requests under /admin/ already run in the audited bypass scope
(teams.middleware.OperatorScopeMiddleware), so nothing here enters a scope itself.
Credentials never reach a page: a token's hash and a vault entry's ciphertext (or its
decrypted value) are left out of every field, column, search and form.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from core.errors import NotFound
from teams import services
from teams.models import AgentToken, AuditEvent, JobRun, Membership, Team, VaultEntry

admin.site.site_header = "MemoryHub operations"
admin.site.site_title = "MemoryHub admin"

SECRET_MASK = "********"  # noqa: S105 (a display mask, not a secret)

if TYPE_CHECKING:
    # django-stubs make the admin classes generic in their model, but Django's own
    # classes cannot be subscripted at run time: only the type checker sees the model.
    _MembershipInline = admin.TabularInline[Membership, Team]
    _TeamAdmin = admin.ModelAdmin[Team]
    _AgentTokenAdmin = admin.ModelAdmin[AgentToken]
    _VaultEntryAdmin = admin.ModelAdmin[VaultEntry]
    _AuditEventAdmin = admin.ModelAdmin[AuditEvent]
else:
    _MembershipInline = admin.TabularInline
    _TeamAdmin = _AgentTokenAdmin = _VaultEntryAdmin = _AuditEventAdmin = admin.ModelAdmin


def _changelist_for_team(url_name: str, team_id: int) -> str:
    # The RelatedFieldListFilter on `team` reads this parameter, so the link lands
    # on the normal changelist with the team filter already selected.
    return f"{reverse(url_name)}?team__id__exact={team_id}"


class MembershipInline(_MembershipInline):
    model = Membership
    extra = 0
    raw_id_fields = ["user"]
    readonly_fields = ["created_at"]


@admin.register(Team)
class TeamAdmin(_TeamAdmin):
    list_display = ["slug", "name", "created_at", "memories_link", "audit_link", "tokens_link", "vault_link"]
    search_fields = ["slug", "name"]
    ordering = ["slug"]
    inlines = [MembershipInline]
    actions = ["shutdown_teams"]

    def get_readonly_fields(self, request: HttpRequest, obj: Team | None = None) -> list[str]:
        # A slug is part of every API URL its agents call; renaming it would break them.
        return ["slug", "created_at"] if obj else ["created_at"]

    def has_delete_permission(self, request: HttpRequest, obj: Team | None = None) -> bool:
        # Memory.supersedes is PROTECT, so a cascading delete cannot remove history;
        # `manage.py shutdown_team` unlinks the chain and deletes inside the team's scope.
        return False

    @admin.display(description="Memories")
    def memories_link(self, team: Team) -> str:
        return format_html(
            '<a href="{}">memories</a>', _changelist_for_team("admin:memories_memory_changelist", team.id)
        )

    @admin.display(description="Audit")
    def audit_link(self, team: Team) -> str:
        return format_html(
            '<a href="{}">supersede audit</a>', reverse("admin:memories_memory_team_audit", args=[team.id])
        )

    @admin.display(description="Tokens")
    def tokens_link(self, team: Team) -> str:
        return format_html(
            '<a href="{}">tokens</a>', _changelist_for_team("admin:teams_agenttoken_changelist", team.id)
        )

    @admin.display(description="Vault")
    def vault_link(self, team: Team) -> str:
        return format_html(
            '<a href="{}">vault</a>', _changelist_for_team("admin:teams_vaultentry_changelist", team.id)
        )

    # --- actions: each asks for confirmation on an intermediate page first -------------

    def has_shutdown_permission(self, request: HttpRequest) -> bool:
        # Deleting a team's rows is what `delete` would mean, had the admin allowed it.
        return request.user.has_perm("teams.delete_team")

    @admin.action(description="Shut down selected teams (delete everything)", permissions=["shutdown"])
    def shutdown_teams(self, request: HttpRequest, queryset: QuerySet[Team]) -> TemplateResponse | None:
        if request.POST.get("post") != "yes":
            return self.confirm_action(
                request,
                queryset,
                action="shutdown_teams",
                title="Shut down teams",
                question="Delete these teams and every memory, version, note, index row, vault entry, "
                "token, session and membership they hold? This cannot be undone.",
                button="Yes, shut them down",
                danger=True,
            )
        actor = f"admin:{request.user.get_username()}"
        for team in list(queryset):
            counts = services.shutdown_team(team=team, actor=actor)
            self.message_user(
                request,
                f"Team {team.slug} shut down ({counts['memories']} memories deleted).",
                messages.SUCCESS,
            )
        return None

    def confirm_action(
        self,
        request: HttpRequest,
        queryset: QuerySet[Team],
        *,
        action: str,
        title: str,
        question: str,
        button: str,
        danger: bool = False,
    ) -> TemplateResponse:
        teams = queryset.annotate(
            active_memories=Count("memories", filter=Q(memories__is_active=True)),
            versions=Count("memories"),
        ).order_by("slug")
        context = {
            **self.admin_site.each_context(request),
            "title": title,
            "question": question,
            "button": button,
            "danger": danger,
            "teams": teams,
            "action": action,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "opts": self.model._meta,
            "media": self.media,
        }
        return TemplateResponse(request, "admin/teams/team/action_confirmation.html", context)


class TokenStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[AgentToken]
    ) -> list[tuple[str, str]]:
        return [("live", "live"), ("revoked", "revoked")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AgentToken]) -> QuerySet[AgentToken]:
        if self.value() == "live":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


# token_hash appears nowhere below: not in fields, columns, search or any form.
TOKEN_FIELDS = ("name", "team", "prefix", "scopes_display", "created_at", "last_used_at", "revoked_at")


@admin.register(AgentToken)
class AgentTokenAdmin(_AgentTokenAdmin):
    list_display = TOKEN_FIELDS
    list_filter = ["team", TokenStatusFilter]
    list_select_related = ["team"]
    search_fields = ["name", "prefix", "team__slug"]
    ordering = ["-created_at"]
    fields = TOKEN_FIELDS
    readonly_fields = TOKEN_FIELDS
    actions = ["revoke_selected_tokens"]

    @admin.display(description="scopes")
    def scopes_display(self, token: AgentToken) -> str:
        return ", ".join(token.scopes)

    # Tokens are issued by `manage.py create_token`, the one place that shows the raw
    # token (once). Here they can only be viewed and revoked; revocation keeps the row,
    # so deletion is off too.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AgentToken | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: AgentToken | None = None) -> bool:
        return False

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        # Revoking is a change to the token, so it needs the model's change permission
        # even though the change form itself is disabled.
        return request.user.has_perm("teams.change_agenttoken")

    @admin.action(description="Revoke selected tokens", permissions=["revoke"])
    def revoke_selected_tokens(self, request: HttpRequest, queryset: QuerySet[AgentToken]) -> None:
        revoked = 0
        for token in queryset.filter(revoked_at__isnull=True).select_related("team"):
            try:
                services.revoke_token(
                    team=token.team, name=token.name, actor=f"admin:{request.user.get_username()}"
                )
            except NotFound:
                continue  # revoked by someone else since the page loaded
            revoked += 1
        skipped = queryset.count() - revoked
        self.message_user(request, f"Revoked {revoked} token(s).", messages.SUCCESS)
        if skipped:
            self.message_user(request, f"{skipped} token(s) were already revoked.", messages.WARNING)


# ciphertext and value appear nowhere below; masked_value is the only view of a value.
VAULT_FIELDS = ("key", "team", "is_secret", "masked_value", "updated_by", "created_at", "updated_at")


@admin.register(VaultEntry)
class VaultEntryAdmin(_VaultEntryAdmin):
    list_display = ["key", "team", "is_secret", "updated_by", "updated_at", "masked_value"]
    list_filter = ["team", "is_secret"]
    list_select_related = ["team"]
    # Never search by value: even for non-secret entries it would be an oracle.
    search_fields = ["key", "team__slug"]
    ordering = ["team__slug", "key"]
    fields = VAULT_FIELDS
    readonly_fields = VAULT_FIELDS

    @admin.display(description="value")
    def masked_value(self, entry: VaultEntry) -> str:
        return SECRET_MASK if entry.is_secret else entry.value

    # Values are written through the API or teams.services (which encrypt secrets);
    # the admin may only look and delete.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: VaultEntry | None = None) -> bool:
        return False

    def delete_model(self, request: HttpRequest, obj: VaultEntry) -> None:
        self._delete(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[VaultEntry]) -> None:
        for entry in queryset.select_related("team"):
            self._delete(request, entry)

    def _delete(self, request: HttpRequest, entry: VaultEntry) -> None:
        # Through the service, so the deletion is logged with the operator's name.
        with contextlib.suppress(NotFound):  # already gone
            services.delete_vault_entry(
                team=entry.team,
                key=entry.key,
                actor=f"admin:{request.user.get_username()}",
                may_change_secrets=True,  # an operator
            )


AUDIT_FIELDS = ("created_at", "team_name", "actor", "action", "target")


# The audit trail is read-only for operators too (the database refuses any change).
@admin.register(AuditEvent)
class AuditEventAdmin(_AuditEventAdmin):
    list_display = AUDIT_FIELDS
    list_filter = ["team", "action"]
    search_fields = ["actor", "target", "team__slug"]
    ordering = ["-created_at"]
    show_full_result_count = False
    fields = AUDIT_FIELDS
    readonly_fields = AUDIT_FIELDS

    def get_queryset(self, request: HttpRequest) -> QuerySet[AuditEvent]:
        # The events of a shut-down team stay without their team: read its slug where
        # there is one, never join it away.
        slug = Team.objects.filter(pk=OuterRef("team_id")).values("slug")[:1]
        return super().get_queryset(request).annotate(team_slug=Subquery(slug))

    @admin.display(description="Team", ordering="team_slug")
    def team_name(self, event: AuditEvent) -> str:
        slug: str | None = getattr(event, "team_slug", None)
        return slug or f"team #{event.team_id} (shut down)"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AuditEvent | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: AuditEvent | None = None) -> bool:
        return False


@admin.register(JobRun)
class JobRunAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """What the beat jobs did, run by run (their schedule: Periodic tasks)."""

    list_display = ("job", "started_at", "finished_at", "succeeded", "outcome", "error")
    list_filter = ("job", "succeeded")
    ordering = ("-started_at",)
    readonly_fields = ("job", "started_at", "finished_at", "succeeded", "outcome", "error")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: JobRun | None = None) -> bool:
        return False
