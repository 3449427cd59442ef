import os

from django.core.wsgi import get_wsgi_application

from memoryhub.celery import warn_if_tasks_run_in_process

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")
django_application = get_wsgi_application()

# After Django is set up: the MCP endpoint (`/mcp/`) is served by the same threaded
# workers, in front of the site (docs/agents.md, "The MCP server").
from agents.mcp.http import with_mcp  # noqa: E402
from memoryhub.request_guard import RequestGuard  # noqa: E402

# In front of everything: a few threads per client at most, bodies read within a
# deadline (docs/security.md, "Web server").
application = RequestGuard(with_mcp(django_application))
warn_if_tasks_run_in_process()
