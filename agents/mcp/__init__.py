"""MemoryHub over the Model Context Protocol (the official `mcp` SDK).

- `tools`: every tool (name, description for a model, JSON input schema with REST's
  limits, annotations, the scope it needs) and its handler, a thin call into the same
  services and selectors as the REST view it mirrors;
- `server`: the SDK's low-level server that lists and calls them, one call at a time in
  one transaction bound to the token's team, as a REST request is;
- `http`: the WSGI application served at `/mcp/` inside the threaded gunicorn workers
  (docs/agents.md, "The MCP server").
"""

# DRF's views before anything of the API: core.api_errors and DRF's settings import each
# other, which works in the order the URLconf imports them, and this package may be the
# first to import them (memoryhub.wsgi loads it at start-up, before any URL is resolved).
import rest_framework.views  # noqa: F401
