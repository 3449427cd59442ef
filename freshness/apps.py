from django.apps import AppConfig


class FreshnessConfig(AppConfig):
    """Beliefs that stay true: confirmations, anchors, nudges, contradictions, and
    extraction drafts waiting for a person's review; the beat jobs that drive them."""

    name = "freshness"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from freshness import contradiction_pass, drafts, services
        from memories import hooks as memory_hooks
        from search import hooks as search_hooks
        from teams import hooks as team_hooks

        memory_hooks.memory_confirmed.register(services.resolve_nudges_of_confirmed)
        memory_hooks.memory_archived.register(services.close_nudges_of_archived)
        search_hooks.memories_indexed.register(contradiction_pass.contradictions_after_indexing)
        search_hooks.texts_disagree.register(contradiction_pass.texts_disagree)
        team_hooks.team_shutdown.register(services.delete_team_nudges)
        team_hooks.team_shutdown.register(drafts.delete_team_drafts)
