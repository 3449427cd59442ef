"""MCP resources and prompts: the team's injection block and each active memory, read by
URI, and the "remember what we learned" prompt.

    memoryhub://team/{slug}/injection{?project}   the injection block (markdown)
    memoryhub://team/{slug}/memory/{key}          the active entry of a key (its text)

A URI naming another team than the token's is not found, as a REST URL is. The readers
run as tool handlers do (agents.mcp.server.run_read: the token's team scope, the read
scope and budget, the vault redaction)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from agents import injection
from agents.mcp.tools import ToolCall, paginate
from agents.sessions import session_in_header
from core.errors import InvalidInput, NotFound
from memories import selectors
from memories.api import MemoryPagination
from teams.validators import check_key

SCHEME = "memoryhub"
RESOURCES_PER_PAGE = 50
DESCRIPTION_CHARS = 200
PROMPT_NAME = "remember_what_we_learned"


def injection_uri(slug: str) -> str:
    return f"{SCHEME}://team/{slug}/injection"


def memory_uri(slug: str, key: str) -> str:
    return f"{SCHEME}://team/{slug}/memory/{key}"


def templates(slug: str) -> list[dict[str, Any]]:
    return [
        {
            "uri_template": injection_uri(slug) + "{?project}",
            "name": "injection",
            "title": "The team's injection block",
            "description": "What an agent should know at the start of a session, for a project "
            "(and team-wide entries), as memory_context renders it.",
            "mime_type": "text/markdown",
        },
        {
            "uri_template": memory_uri(slug, "{key}"),
            "name": "memory",
            "title": "A memory by key",
            "description": "The text of the active entry of a key.",
            "mime_type": "text/plain",
        },
    ]


def list_resources(call: ToolCall) -> dict[str, Any]:
    """The injection block and the active memories, newest first, a page at a time."""
    slug = call.team.slug
    rows = selectors.list_memories(team=call.team)
    cursor = call.arguments.get("cursor")
    page, next_cursor = paginate(MemoryPagination, rows, limit=RESOURCES_PER_PAGE, cursor=cursor)
    resources = [] if cursor else [
        {"uri": injection_uri(slug), "name": "injection", "title": "The team's injection block",
         "mime_type": "text/markdown"}
    ]  # fmt: skip
    resources += [
        {
            "uri": memory_uri(slug, memory.key),
            "name": memory.key,
            "title": memory.key,
            "description": f"{memory.type}: {_first_line(memory.content)}",
            "mime_type": "text/plain",
        }
        for memory in page
    ]
    return {"resources": resources, "next_cursor": next_cursor}


def read_resource(call: ToolCall) -> dict[str, Any]:
    uri: str = call.arguments["uri"]
    parts = urlsplit(uri)
    segments = parts.path.strip("/").split("/", 2)
    if parts.scheme != SCHEME or parts.netloc != "team" or len(segments) < 2:
        raise InvalidInput(f"not a MemoryHub resource: use {SCHEME}://team/<team>/...", field="uri")
    slug, kind = segments[0], segments[1]
    if slug != call.team.slug:
        raise NotFound("not found")  # another team's: as REST answers, whether it exists or not
    if kind == "injection" and len(segments) == 2:
        project = _single(parse_qs(parts.query, keep_blank_values=True).get("project"))
        block = injection.build_injection(
            team=call.team, project=project, live=True, reader_session=session_in_header(call.session_header)
        )
        return {"uri": uri, "mime_type": "text/markdown", "text": block.text}
    if kind == "memory" and len(segments) == 3:
        key = segments[2]
        check_key(key)
        memory = selectors.get_active_memory(team=call.team, key=key)
        return {"uri": uri, "mime_type": "text/plain", "text": memory.content}
    raise NotFound("no such resource")


def _single(values: list[str] | None) -> str | None:
    if not values:
        return None
    if len(values) > 1:
        raise InvalidInput("project is given more than once", field="project")
    return values[0]


def _first_line(text: str) -> str:
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line[:DESCRIPTION_CHARS]


PROMPT_DESCRIPTION = (
    "Asks you to look back over the work so far and propose what the team should remember, "
    "as learnings to record with learning_record."
)


def remember_prompt(arguments: dict[str, str]) -> str:
    topic = arguments.get("topic", "").strip()
    focus = f" about {topic}" if topic else ""
    return (
        f"Look back over what we did and found in this session{focus}. List the lessons worth "
        "keeping for the team: things that surprised us, mistakes and how we fixed them, facts "
        "we verified. Leave out what is obvious or already in the team's memory (search it "
        "with memory_search first).\n\n"
        "Write each lesson as one JSON object in the shape learning_record takes:\n"
        '{"topic": "<what it is about, e.g. deploys>", "claim": "<one statement>", '
        '"confidence": "high" | "medium" | "low", "corroborated": <true if a second source '
        'confirmed it>, "domains": ["<short labels>"], "verified": <true if checked against '
        'reality, e.g. by a test>, "type": "lesson" | "reference"}\n\n'
        "Then call learning_record once for each lesson you are confident is right."
    )
