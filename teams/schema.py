"""OpenAPI (drf-spectacular) description of how agents authenticate.

Imported from TeamsConfig.ready() so the extension is registered before any schema
is generated."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object


class AgentTokenScheme(OpenApiAuthenticationExtension):
    target_class = "teams.authentication.AgentTokenAuthentication"
    name = "AgentToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        scheme = build_bearer_security_scheme_object(header_name="Authorization", token_prefix="Bearer")  # noqa: S106
        scheme["description"] = (
            "An agent token of the team in the URL, sent as `Authorization: Bearer <token>`. "
            "Its scopes (read, write, admin) decide which actions it may take."
        )
        return scheme
