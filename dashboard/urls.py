"""The dashboard: sign-in at /login/, the team picker at /, every team page under
/teams/<slug>/. `memories/+new/` cannot clash with a memory key ('+' is not a key
character)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from dashboard.views import accounts, daily_log, facts, memories, pages, review, team_admin, team_settings

app_name = "dashboard"

team = "teams/<str:slug>/"

urlpatterns = [
    path("login/", accounts.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password-reset/", accounts.PasswordResetView.as_view(), name="password_reset"),
    path("password-reset/sent/", accounts.PasswordResetDoneView.as_view(), name="password_reset_done"),
    path(
        "password-reset/<str:uidb64>/<str:token>/",
        accounts.PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path(
        "password-reset/done/", accounts.PasswordResetCompleteView.as_view(), name="password_reset_complete"
    ),
    path("", pages.home, name="home"),
    path(team, pages.overview, name="overview"),
    path(team + "reindex/", pages.reindex, name="reindex"),
    path(team + "search/", pages.search, name="search"),
    path(team + "injection/", pages.injection, name="injection"),
    path(team + "sessions/", pages.sessions, name="sessions"),
    path(team + "log/", daily_log.daily_log_page, name="daily_log"),
    path(team + "review/", review.review, name="review"),
    # <str:…>, not <uuid:…>: a malformed id gets the dashboard's own 404 page.
    path(team + "review/<str:nudge_id>/resolve/", review.review_resolve, name="review_resolve"),
    path(team + "review/drafts/<str:draft_id>/", review.review_draft, name="review_draft"),
    path(team + "memories/", memories.memory_list, name="memories"),
    path(team + "memories/+new/", memories.memory_create, name="memory_create"),
    path(team + "memories/<str:key>/", memories.memory_detail, name="memory"),
    path(team + "memories/<str:key>/edit/", memories.memory_edit, name="memory_edit"),
    path(team + "memories/<str:key>/delete/", memories.memory_delete, name="memory_delete"),
    path(team + "memories/<str:key>/unsupersede/", memories.memory_unsupersede, name="memory_unsupersede"),
    path(team + "memories/<str:key>/annotate/", memories.memory_annotate, name="memory_annotate"),
    path(team + "memories/<str:key>/rate/", memories.memory_rate, name="memory_rate"),
    path(team + "facts/", facts.fact_list, name="facts"),
    path(team + "facts/<str:entity>/<str:key>/reveal/", facts.fact_reveal, name="fact_reveal"),
    path(team + "vault/", team_admin.vault, name="vault"),
    path(team + "vault/<str:key>/rotate/", team_admin.vault_rotate, name="vault_rotate"),
    path(team + "vault/<str:key>/delete/", team_admin.vault_delete, name="vault_delete"),
    path(team + "vault/<str:key>/reveal/", team_admin.vault_reveal, name="vault_reveal"),
    path(team + "tokens/", team_admin.tokens, name="tokens"),
    path(team + "tokens/<int:token_id>/revoke/", team_admin.token_revoke, name="token_revoke"),
    path(team + "members/", team_admin.members, name="members"),
    path(team + "members/<int:membership_id>/role/", team_admin.member_role, name="member_role"),
    path(team + "members/<int:membership_id>/remove/", team_admin.member_remove, name="member_remove"),
    path(team + "audit/", team_admin.audit_log, name="audit_log"),
    path(team + "settings/", team_settings.team_settings, name="team_settings"),
    path(team + "shutdown/", team_admin.shutdown, name="shutdown"),
]
