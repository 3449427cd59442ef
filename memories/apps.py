from django.apps import AppConfig


class MemoriesConfig(AppConfig):
    name = "memories"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from memories import services
        from teams import hooks as team_hooks

        team_hooks.team_shutdown.register(services.delete_team_memories)
