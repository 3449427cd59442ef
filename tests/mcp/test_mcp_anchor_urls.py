"""Anchor URLs over MCP: memory_save and memory_save_batch store an anchor as REST does and
refuse what the anchor check would refuse, in REST's error shape naming the `anchor` field
(the same rule as REST: tests/memories/test_anchor_urls.py)."""

from __future__ import annotations

import pytest

from memories.models import Memory
from teams.models import Team
from tests.conftest import make_agent, operator_view
from tests.mcp.conftest import Server
from tests.mcp.test_mcp_access import call_all

pytestmark = pytest.mark.django_db(transaction=True)

BAD_URLS = ["http://0177.0.0.1:18555/h", "http://2130706433/", "http://user:pw@example.com/", "http://xn--/"]


def test_memory_save_and_save_batch_refuse_a_bad_anchor_url_naming_the_field(
    mcp_server: Server, team: Team
) -> None:
    token = make_agent(team, "mcp-bot", ["read", "write"]).token
    saves = [
        ("memory_save", {"key": f"bad-{n}", "content": "Anchored.", "anchor": {"type": "url", "value": url}})
        for n, url in enumerate(BAD_URLS)
    ]
    batch = (
        "memory_save_batch",
        {
            "entries": [
                {
                    "key": "batch-bad",
                    "content": "Anchored.",
                    "anchor": {"type": "api", "value": "http://0x7f.1/"},
                },
                {
                    "key": "batch-good",
                    "content": "Anchored.",
                    "anchor": {"type": "url", "value": "https://example.com/"},
                },
            ]
        },
    )

    good = (
        "memory_save",
        {
            "key": "good",
            "content": "Anchored on its own.",
            "anchor": {"type": "url", "value": "https://example.com/"},
        },
    )

    answers = call_all(mcp_server, token, [*saves, batch, good])

    good_error, good_body = answers.pop()
    assert not good_error and good_body["saved"] is True
    for is_error, body in answers[:-1]:
        assert is_error and body["error"] == "invalid" and "anchor" in body["fields"], body
    batch_error, batch_body = answers[-1]
    assert not batch_error
    bad, good = batch_body["results"]
    assert bad["status"] == "error" and "anchor" in bad["error"]["fields"]
    assert good["status"] == "created"
    with operator_view():
        saved = dict(Memory.objects.filter(team=team).values_list("key", "anchor"))
    assert saved == {
        "batch-good": {"type": "url", "value": "https://example.com/"},
        "good": {"type": "url", "value": "https://example.com/"},
    }
