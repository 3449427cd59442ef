"""Every API response body passes the team's vault secrets out on its way out.

Credential shapes were scrubbed from content, notes and metadata when they were
written; what a read must still redact is a secret added to the vault after the text
was (teams.vault_matcher): one compiled alternation, cached per team. An error body is
scrubbed whole, credential shapes too: it may quote input that was never written (an
unknown type, a value that failed validation).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework.renderers import JSONRenderer

from teams.scrubber import SecretMatcher, scrub_json
from teams.vault_matcher import team_secret_matcher

_NO_SECRETS = SecretMatcher(())


class ScrubbingJSONRenderer(JSONRenderer):
    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        view = (renderer_context or {}).get("view")
        team = getattr(view, "team", None)
        response = (renderer_context or {}).get("response")
        is_error = response is not None and response.status_code >= 400
        if data is not None and (is_error or not getattr(view, "reveals_secret", False)):
            # Rendered inside the request's transaction and team scope (teams.calls).
            data = redact_answer(
                data,
                team_id=team.id if team is not None else None,
                is_error=is_error,
                vault_version=getattr(view, "vault_version", None),
            )
        return super().render(data, accepted_media_type, renderer_context)


def redact_answer(data: Any, *, team_id: int | None, is_error: bool, vault_version: int | None = None) -> Any:
    """An answer of the team's (None: of no team yet) as it may leave the service: its
    vault secrets redacted; an error's credential shapes too. Call it inside the team's
    scope; `vault_version` is the team's, when the caller read it in this call and the
    call wrote no vault entry (teams.vault_matcher)."""
    if is_error:
        matcher = (
            team_secret_matcher(team_id=team_id, vault_version=vault_version)
            if team_id is not None
            else _NO_SECRETS
        )
        return scrub_json(data, matcher)[0]
    if team_id is None:
        return data
    matcher = team_secret_matcher(team_id=team_id, vault_version=vault_version)
    return data if matcher.is_empty else redact_node(data, matcher)


def redact_node(node: Any, matcher: SecretMatcher) -> Any:
    """Every string in a JSON-shaped value, with the matcher's secrets redacted."""
    if isinstance(node, str):
        return matcher.redact(node)[0]
    if isinstance(node, dict):
        return {key: redact_node(value, matcher) for key, value in node.items()}
    if isinstance(node, list | tuple):
        return [redact_node(value, matcher) for value in node]
    return node
