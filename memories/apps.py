from django.apps import AppConfig


class MemoriesConfig(AppConfig):
    name = "memories"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from memories import writes
        from memories.conversations.services import delete_team_conversations
        from memories.facts.services import delete_team_facts
        from teams import hooks as team_hooks

        team_hooks.team_shutdown.register(writes.delete_team_memories)
        team_hooks.team_shutdown.register(delete_team_facts)
        team_hooks.team_shutdown.register(delete_team_conversations)
