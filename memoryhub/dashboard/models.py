"""The dashboard's one table: an audit log of sensitive actions people take in it.

Revealing a vault secret is the action that must leave a trace (it is also logged to
the `memoryhub.audit` logger); token, vault, member and re-index changes made from the
dashboard are recorded too, so a team admin can see who did what. Team-scoped like
every tenant table: row-level security is enabled in the migration.
"""

from __future__ import annotations

from django.db import models

from teams.models import Team


class AuditEvent(models.Model):
    class Action(models.TextChoices):
        VAULT_REVEAL = "vault.reveal"
        VAULT_SET = "vault.set"
        VAULT_DELETE = "vault.delete"
        TOKEN_CREATE = "token.create"  # noqa: S105 (an action name)
        TOKEN_REVOKE = "token.revoke"  # noqa: S105 (an action name)
        MEMBER_ADD = "member.add"
        MEMBER_ROLE = "member.role"
        MEMBER_REMOVE = "member.remove"
        TEAM_REINDEX = "team.reindex"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=32, choices=Action.choices)
    target = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["team", "-created_at"], name="auditevent_team_recent")]

    def __str__(self) -> str:
        return f"{self.actor} {self.action} {self.target}"
