"""Bad input answers a clear 4xx in the one error shape, never a 500, and writes nothing."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from memories.models import MAX_CONTENT_BYTES, Memory
from teams import services
from teams.models import VaultEntry
from tests.conftest import Agent, operator_view


def assert_error(response, status: int, code: str | None = None) -> dict:  # type: ignore[no-untyped-def]
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) >= {"error", "detail"}
    assert set(body) <= {"error", "detail", "fields", "current"}
    assert isinstance(body["error"], str) and isinstance(body["detail"], str)
    if code is not None:
        assert body["error"] == code
    return body


def nothing_written(agent: Agent) -> bool:
    with operator_view():
        return not Memory.objects.exists() and not VaultEntry.objects.exists()


def raw_post(agent: Agent, path: str, raw: bytes | str, content_type: str = "application/json"):  # type: ignore[no-untyped-def]
    return agent.client.generic("POST", agent.url(path), raw, content_type=content_type)


@pytest.mark.parametrize(
    "raw",
    ['{"key": "k", "content": ', "{'key': 'k'}", "not json", '{"key": "k", "content": NaN}', b"\xff\xfe{}"],
)
def test_malformed_json_is_400(member: Agent, raw: str | bytes) -> None:
    assert_error(raw_post(member, "memories/", raw), 400, "malformed_json")
    assert nothing_written(member)


@pytest.mark.parametrize("raw", ["[]", '"a string"', "42", "null"])
def test_non_object_body_is_400(member: Agent, raw: str) -> None:
    assert_error(raw_post(member, "memories/", raw), 400)
    assert nothing_written(member)


@pytest.mark.parametrize(
    "body",
    [
        {"key": 42, "content": "x"},
        {"key": "k", "content": ["x"]},
        {"key": "k", "content": {"text": "x"}},
        {"key": "k", "content": "x", "type": 3},
        {"key": "k", "content": "x", "metadata": "tags"},
        {"key": "k", "content": "x", "metadata": [1, 2]},
        {"key": "k", "content": "x", "project": ["web"]},
        {"key": "k", "content": "x", "supersede_reason": {"why": "x"}},
        {"key": ["k"], "content": "x"},
        {"content": "x"},
        {"key": "k"},
    ],
)
def test_wrong_types_and_missing_fields_are_400(member: Agent, body: dict) -> None:
    body_json = assert_error(member.client.post(member.url("memories/"), body, format="json"), 400, "invalid")
    assert body_json["fields"]
    assert nothing_written(member)


def test_unknown_fields_are_400_and_named(member: Agent) -> None:
    response = member.client.post(
        member.url("memories/"), {"key": "k", "content": "x", "supersede_reson": "typo"}, format="json"
    )
    body = assert_error(response, 400, "invalid")
    assert "supersede_reson" in body["fields"]
    assert nothing_written(member)


@pytest.mark.parametrize("content", ["", "   "])
def test_empty_content_is_400(member: Agent, content: str) -> None:
    response = member.client.post(member.url("memories/"), {"key": "k", "content": content}, format="json")
    assert_error(response, 400)
    assert nothing_written(member)


def test_content_over_64_kib_is_400(member: Agent) -> None:
    response = member.client.post(
        member.url("memories/"), {"key": "k", "content": "é" * (MAX_CONTENT_BYTES // 2 + 1)}, format="json"
    )
    assert_error(response, 400, "content_too_large")
    assert nothing_written(member)


@override_settings(MAX_REQUEST_BODY_BYTES=4096)
def test_oversized_body_is_413(member: Agent) -> None:
    response = raw_post(member, "memories/", json.dumps({"key": "k", "content": "x" * 5000}))
    assert_error(response, 413, "body_too_large")
    assert nothing_written(member)


def test_default_body_limit_is_one_mebibyte(member: Agent) -> None:
    response = raw_post(member, "memories/", json.dumps({"key": "k", "content": "x" * (1024 * 1024)}))
    assert_error(response, 413, "body_too_large")


@pytest.mark.parametrize(
    "body",
    [
        {"key": "k\x00", "content": "x"},
        {"key": "k", "content": "a\x00b"},
        {"key": "k", "content": "x", "type": "lesson\x00"},
        {"key": "k", "content": "x", "project": "p\x00"},
        {"key": "k", "content": "x", "supersede_reason": "r\x00"},
        {"key": "k", "content": "x", "metadata": {"tag\x00": "v"}},
        {"key": "k", "content": "x", "metadata": {"tags": ["ok", "bad\x00"]}},
    ],
)
def test_nul_bytes_in_any_string_are_400(member: Agent, body: dict) -> None:
    assert_error(member.client.post(member.url("memories/"), body, format="json"), 400, "invalid_characters")
    assert nothing_written(member)


def test_nul_byte_in_vault_value_is_400(member: Agent) -> None:
    response = member.client.put(member.url("vault/k/"), {"value": "a\x00b"}, format="json")
    assert_error(response, 400, "invalid_characters")
    assert nothing_written(member)


def test_lone_surrogate_is_400(member: Agent) -> None:
    assert_error(
        raw_post(member, "memories/", '{"key": "k", "content": "\\ud800"}'), 400, "invalid_characters"
    )
    assert nothing_written(member)


@pytest.mark.parametrize("params", [{"project": "p\x00"}, {"type": "\x00"}])
def test_nul_bytes_in_query_parameters_are_400(member: Agent, params: dict) -> None:
    assert_error(member.client.get(member.url("memories/"), params), 400)


@pytest.mark.parametrize("slug", ["Alpha", "-alpha", "al_pha", "a" * 64])
def test_malformed_team_slug_is_400(member: Agent, slug: str) -> None:
    assert_error(member.client.get(f"/api/v1/teams/{slug}/memories/"), 400)


@pytest.mark.parametrize("key", ["-k", "k k", "%00", "ä", "x" * 201])
def test_malformed_keys_in_path_are_400(member: Agent, key: str) -> None:
    assert_error(member.client.get(member.url(f"memories/{key}/")), 400)
    assert_error(member.client.delete(member.url(f"memories/{key}/")), 400)
    assert_error(member.client.put(member.url(f"vault/{key}/"), {"value": "v"}, format="json"), 400)
    assert nothing_written(member)


@pytest.mark.parametrize("key", ["-k", "k k", "", "k/k", "x" * 201])
def test_malformed_keys_in_body_are_400(member: Agent, key: str) -> None:
    response = member.client.post(member.url("memories/"), {"key": key, "content": "x"}, format="json")
    assert_error(response, 400, "invalid")
    assert nothing_written(member)


def test_unknown_type_is_400_with_the_types_then_their_aliases(member: Agent) -> None:
    response = member.client.post(
        member.url("memories/"), {"key": "k", "content": "x", "type": "gossip"}, format="json"
    )
    body = assert_error(response, 400, "unknown_type")
    assert body["detail"].startswith(
        "unknown type 'gossip'; use one of identity, lesson, decision, context, reference, historical, "
        "or an alias: core, self (identity); warning, insight, learning, procedural (lesson);"
    )
    assert nothing_written(member)
    # Every door that takes a type says the same.
    listed = assert_error(member.client.get(member.url("memories/"), {"type": "gossip"}), 400, "invalid")
    searched = member.client.post(member.url("search/"), {"query": "x", "types": ["gossip"]}, format="json")
    assert (
        listed["fields"]["type"]
        == assert_error(searched, 400, "invalid")["fields"]["types"]
        == [body["detail"]]
    )


def test_missing_token_is_401_with_challenge(team: object) -> None:
    response = APIClient().get("/api/v1/teams/alpha/memories/")
    assert_error(response, 401, "unauthenticated")
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "header", ["Bearer", "Bearer mh_wrong", "Token abc", "Bearer a b", "Basic dXNlcjpwYXNz", "Bearer ümlaut"]
)
def test_bad_or_unknown_tokens_are_401(member: Agent, header: str) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    assert_error(client.post(member.url("memories/"), {"key": "k", "content": "x"}, format="json"), 401)
    assert nothing_written(member)


def test_revoked_token_is_401(member: Agent) -> None:
    services.revoke_token(team=member.team, name="writer-bot", actor="test")

    response = member.client.get(member.url("memories/"))

    body = assert_error(response, 401, "unauthenticated")
    assert "revoked" in body["detail"]


def test_under_scoped_token_is_403(readonly_member: Agent) -> None:
    response = readonly_member.client.put(readonly_member.url("vault/k/"), {"value": "v"}, format="json")
    assert_error(response, 403, "forbidden")
    assert nothing_written(readonly_member)


def test_non_json_content_type_is_415(member: Agent) -> None:
    assert_error(
        raw_post(member, "memories/", "key=k", content_type="text/plain"), 415, "unsupported_media_type"
    )


def test_unknown_method_is_405(member: Agent) -> None:
    assert_error(member.client.patch(member.url("memories/k/"), {}, format="json"), 405, "method_not_allowed")


@pytest.mark.parametrize(
    "params", [{"cursor": "garbage"}, {"limit": "0"}, {"limit": "abc"}, {"limit": "201"}]
)
def test_bad_pagination_parameters_are_400(member: Agent, params: dict) -> None:
    assert_error(member.client.get(member.url("memories/"), params), 400)


@pytest.mark.parametrize("session", ["has space", "x" * 65, "bad\x01char"])
def test_bad_session_header_is_400(member: Agent, session: str) -> None:
    response = member.client.post(
        member.url("memories/"), {"key": "k", "content": "x"}, format="json", HTTP_X_MEMORYHUB_SESSION=session
    )
    assert_error(response, 400)
    assert nothing_written(member)


@pytest.mark.parametrize(
    "body",
    [
        {"value": 5},
        {"value": "v", "is_secret": "maybe"},
        {"is_secret": True},
        {"value": ""},
        {"value": "v", "x": 1},
    ],
)
def test_bad_vault_bodies_are_400(member: Agent, body: dict) -> None:
    assert_error(member.client.put(member.url("vault/k/"), body, format="json"), 400)
    assert nothing_written(member)


def test_unknown_api_route_is_json_404(member: Agent) -> None:
    assert_error(member.client.get("/api/v1/nothing-here/"), 404, "not_found")
