from django.apps import AppConfig


class SearchConfig(AppConfig):
    name = "search"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from memories import hooks as memory_hooks
        from search import conversation_index, duplicates_on_save, services, tasks
        from teams import hooks as team_hooks

        memory_hooks.memory_written.register(tasks.index_after_commit)
        memory_hooks.memories_written.register(tasks.index_batch_after_commit)
        memory_hooks.find_duplicate.register(duplicates_on_save.find_duplicate)
        memory_hooks.find_duplicates.register(duplicates_on_save.find_exact_duplicates)
        memory_hooks.conversation_stored.register(conversation_index.index_conversation_after_commit)
        team_hooks.team_shutdown.register(services.delete_team_index)
