from django.apps import AppConfig


class AgentsConfig(AppConfig):
    """What agents use beyond CRUD: sessions, the injection block (and, next, MCP and
    import/export)."""

    name = "agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agents import receivers

        receivers.register()
