from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "teams"
    default_auto_field = "django.db.models.BigAutoField"
