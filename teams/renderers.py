"""Every API response body passes the credential scrubber on its way out."""

from __future__ import annotations

from typing import Any

from rest_framework.renderers import JSONRenderer

from teams.scrubber import scrub


class ScrubbingJSONRenderer(JSONRenderer):
    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: dict[str, Any] | None = None,
    ) -> bytes:
        view = (renderer_context or {}).get("view")
        if data is not None and not getattr(view, "reveals_secret", False):
            secrets = tuple(getattr(view, "team_secrets", None) or ())
            data = _scrub_node(data, secrets)
        return super().render(data, accepted_media_type, renderer_context)


def _scrub_node(node: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(node, str):
        return scrub(node, secrets).text
    if isinstance(node, dict):
        return {key: _scrub_node(value, secrets) for key, value in node.items()}
    if isinstance(node, list | tuple):
        return [_scrub_node(value, secrets) for value in node]
    return node
