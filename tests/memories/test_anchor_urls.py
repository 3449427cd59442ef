"""Anchor URLs are held to one rule on every way in (REST create, REST batch; MCP in
tests/mcp/test_mcp_anchor_urls.py) and by the anchor check itself, so that what a team
saves is what the check can check: a refused URL is a 400 naming the `anchor` field, and
the check refuses exactly the same URLs before it resolves or connects anything."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from django.test import override_settings

from core.errors import InvalidInput
from freshness import anchor_http
from freshness.anchor_http import FetchPolicy, check_anchor_url, guarded_client
from memories import writes
from memories.models import Memory
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import Agent, operator_view

# Shapes an anchor check cannot or may not fetch: numeric hosts a resolver reads as an
# address (octal, hex, a bare integer, a short dotted form), bad ports, credentials,
# other schemes, hosts IDNA refuses, malformed hosts, and address literals the SSRF
# policy refuses.
REFUSED_URLS = [
    "http://0177.0.0.1:18555/h",
    "http://0x7f.1/",
    "http://0x7f000001/",
    "http://2130706433/",
    "http://127.1/",
    "http://017700000001/",
    "http://1.2.3.4./",
    "http://example.123/",
    "http://example.com:0/",
    "http://example.com:65536/",
    "http://example.com:99999/",
    "http://example.com:-1/",
    "http://example.com:http/",
    "http://example.com:80:80/",
    "http://user@example.com/",
    "http://user:secret@example.com/",
    "http://example.com\\@evil.example/",
    "ftp://example.com/file",
    "file:///etc/passwd",
    "gopher://example.com/",
    "javascript:alert(1)",
    "http:///path-without-host",
    "http:example.com",
    "//example.com/no-scheme",
    "http://xn--/",
    "http://xn--a.com/",
    "http://\u2163.example/",
    "http://a..b.example/",
    "http://-leading-hyphen.example/",
    "http://ex%41mple.com/",
    "http://" + "a" * 64 + ".example/",
    "http://[fe80::1%25eth0]/",
    "http://127.0.0.1/",
    "http://10.0.0.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://0.0.0.0/",
    "https://example.org/" + "a" * 2001,
]

ACCEPTED_URLS = [
    "https://example.com/",
    "HTTPS://Example.COM:8443/runbook?section=deploy#top",
    "http://\u00e9xample.com/",
    "http://docs.example.com./",
    "http://build_server.example.com/",
    "http://93.184.215.14/status",
    "http://[2606:4700:4700::1111]/",
    "https://example.com/a%20path/with?query=1&x=%00ok",
]


def post_anchor(agent: Agent, url: Any, key: str = "anchored") -> Any:
    return agent.client.post(
        agent.url("memories/"),
        {"key": key, "content": "Anchored to a page.", "anchor": {"type": "url", "value": url}},
        format="json",
    )


@pytest.mark.django_db
@pytest.mark.parametrize("url", REFUSED_URLS)
def test_a_url_the_check_refuses_is_a_400_naming_the_anchor_and_nothing_is_saved(
    member: Agent, url: str
) -> None:
    response = post_anchor(member, url)

    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error"] == "invalid"
    assert "anchor" in body["fields"], body
    with operator_view():
        assert not Memory.objects.filter(team=member.team, key="anchored").exists()


@pytest.mark.django_db
@pytest.mark.parametrize("url", ACCEPTED_URLS)
def test_a_url_the_check_can_fetch_is_saved_as_given(member: Agent, url: str) -> None:
    response = post_anchor(member, url)

    assert response.status_code == 201, response.content
    assert response.json()["anchor"] == {"type": "url", "value": url}


@pytest.mark.django_db
def test_an_api_anchor_is_held_to_the_same_rule(member: Agent) -> None:
    response = member.client.post(
        member.url("memories/"),
        {"key": "api", "content": "An API.", "anchor": {"type": "api", "value": "http://0x7f.1/health"}},
        format="json",
    )

    assert response.status_code == 400 and "anchor" in response.json()["fields"]


@pytest.mark.django_db
def test_a_nul_byte_in_an_anchor_is_refused_with_400(member: Agent) -> None:
    # The strict JSON parser refuses NUL anywhere in a body, before any field is read.
    response = post_anchor(member, "https://example.com/\x00")

    assert response.status_code == 400
    assert set(response.json()) >= {"error", "detail"}


@pytest.mark.django_db
@override_settings(MEMORYHUB_ANCHOR_ALLOWED_NETWORKS=["127.0.0.0/8"])
def test_an_address_literal_in_a_network_the_operator_allows_is_saved(member: Agent) -> None:
    allowed = post_anchor(member, "http://127.0.0.1:8080/health", key="allowed")
    still_refused = post_anchor(member, "http://10.0.0.1/", key="refused")

    assert allowed.status_code == 201, allowed.content
    assert still_refused.status_code == 400


@pytest.mark.django_db
def test_a_supersede_with_a_bad_anchor_is_refused_and_the_active_version_stays(member: Agent) -> None:
    assert post_anchor(member, "https://example.com/").status_code == 201

    response = member.client.post(
        member.url("memories/"),
        {
            "key": "anchored",
            "content": "Moved.",
            "supersede_reason": "moved",
            "anchor": {"type": "url", "value": "http://2130706433/"},
        },
        format="json",
    )

    assert response.status_code == 400 and "anchor" in response.json()["fields"]
    with operator_view():
        active = Memory.objects.get(team=member.team, key="anchored", is_active=True)
    assert active.anchor == {"type": "url", "value": "https://example.com/"}


@pytest.mark.django_db
def test_a_batch_refuses_each_bad_anchor_as_an_error_of_its_own(member: Agent) -> None:
    entries = [
        {"key": f"bad-{number}", "content": "Anchored.", "anchor": {"type": "url", "value": url}}
        for number, url in enumerate(["http://0177.0.0.1:18555/h", "http://u:p@example.com/", "ftp://x/"])
    ]
    entries.append(
        {"key": "good", "content": "Anchored.", "anchor": {"type": "url", "value": ACCEPTED_URLS[0]}}
    )

    response = member.client.post(member.url("memories/batch/"), {"entries": entries}, format="json")

    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["error", "error", "error", "created"]
    for result in results[:3]:
        assert result["error"]["error"] == "invalid" and "anchor" in result["error"]["fields"]
    with operator_view():
        assert list(Memory.objects.filter(team=member.team).values_list("key", flat=True)) == ["good"]


# --------------------------------------------------------------------------- save and check agree


LOCAL_POLICY = FetchPolicy(
    allowed_networks=anchor_http.parse_networks(["127.0.0.0/8"]),
    connect_timeout=1.0,
    read_timeout=0.5,
    max_redirects=1,
    deadline_seconds=2.0,
)


def _saved(team: Team, url: str) -> bool:
    try:
        with team_scope(team.id):
            writes.save_memory(
                team=team,
                key="probe",
                content="A probe.",
                anchor={"type": "url", "value": url},
                updated_by="t",
                supersede_reason="probe",
            )
    except InvalidInput:
        return False
    return True


@pytest.mark.django_db
@override_settings(MEMORYHUB_ANCHOR_ALLOWED_NETWORKS=["127.0.0.0/8"])
@pytest.mark.parametrize("url", [*REFUSED_URLS, *ACCEPTED_URLS, "http://127.0.0.1:1/", "http://[::1]:1/"])
def test_the_save_and_the_check_refuse_exactly_the_same_urls(
    team: Team, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One rule, two callers: a URL the save refuses, the check refuses before any name
    is resolved (no lookup, no connection); a URL the save takes, the check goes on to
    resolve (here every name resolves to a closed loopback port)."""
    lookups: list[str] = []

    def resolve(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        lookups.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 1))]

    monkeypatch.setattr(anchor_http.socket, "getaddrinfo", resolve)

    saved = _saved(team, url)
    with guarded_client(LOCAL_POLICY) as client:
        result = check_anchor_url(client, url, None, LOCAL_POLICY)

    assert not result.ok
    assert saved == bool(lookups), (saved, lookups, result)
