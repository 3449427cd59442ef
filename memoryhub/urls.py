from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from agents.api_daily_log import DailyLogViewSet
from agents.api_injection import InjectionViewSet
from agents.api_sessions import AgentSessionViewSet
from freshness.api import NudgeViewSet
from freshness.api_anchors import AnchorViewSet
from freshness.api_drafts import DraftViewSet
from memories.api import MemoryViewSet
from memories.api_learnings import LearningViewSet
from memories.api_skills import SkillViewSet
from memories.api_transfer import ExportViewSet, ImportViewSet
from memories.conversations.api import ConversationViewSet
from memories.facts.api import FactViewSet
from memoryhub import health
from memoryhub.metrics_endpoint import metrics_view
from search.api import SearchViewSet
from teams.api import AuditEventViewSet, VaultViewSet

router = SimpleRouter()
router.register("memories", MemoryViewSet, basename="memory")
router.register("vault", VaultViewSet, basename="vault")
router.register("search", SearchViewSet, basename="search")
router.register("injection", InjectionViewSet, basename="injection")
router.register("sessions", AgentSessionViewSet, basename="session")
router.register("log", DailyLogViewSet, basename="daily-log")
router.register("learnings", LearningViewSet, basename="learning")
router.register("skills", SkillViewSet, basename="skill")
router.register("audit", AuditEventViewSet, basename="audit")
router.register("export", ExportViewSet, basename="export")
router.register("import", ImportViewSet, basename="import")
router.register("nudges", NudgeViewSet, basename="nudge")
router.register("anchors", AnchorViewSet, basename="anchor")
router.register("drafts", DraftViewSet, basename="draft")
router.register("facts", FactViewSet, basename="fact")
router.register("conversations", ConversationViewSet, basename="conversation")


urlpatterns = [
    path("api/v1/teams/<str:team>/", include(router.urls)),
    # Public and unauthenticated: a client's Authorization header is not looked at
    # (token lookup needs the request transaction only team-scoped viewsets open).
    path("api/schema/", SpectacularAPIView.as_view(authentication_classes=[]), name="schema"),
    path(
        "api/docs/",
        SpectacularSwaggerView.as_view(url_name="schema", authentication_classes=[]),
        name="api-docs",
    ),
    # Probes (memoryhub.health): liveness touches nothing, readiness checks every component.
    path("healthz", health.liveness, name="health"),
    path("readyz", health.readiness, name="readiness"),
    # Prometheus, with a bearer token (memoryhub.metrics_endpoint); a 404 otherwise.
    path("metrics", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    # The web dashboard (sign-in, team picker, /teams/<slug>/...); last, so it never
    # shadows the API, the docs or the admin.
    path("", include("dashboard.urls")),
]

handler400 = "core.api_errors.json_400"
handler403 = "core.api_errors.json_403"
handler404 = "core.api_errors.json_404"
handler500 = "core.api_errors.json_500"
