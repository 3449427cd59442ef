from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The people-facing web dashboard: server-rendered pages under /teams/<slug>/."""

    name = "dashboard"
    label = "dashboard"
    verbose_name = "Dashboard"
    default_auto_field = "django.db.models.BigAutoField"
