from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "teams"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from teams import schema  # noqa: F401  (registers the OpenAPI auth extension)
