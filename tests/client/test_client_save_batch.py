"""`memoryhub save --batch FILE.jsonl` against the real server: every
line saved through POST memories/batch/ in requests of at most 500 (and under the body
limit), refused entries
reported one line each with exit status 1, the same file again unchanged, and a file
that is not JSON Lines refused before anything is sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memories.models import Memory
from memoryhub_client.batch import requests_of
from teams.models import Team
from tests.client.conftest import Cli, server_env
from tests.conftest import make_agent, operator_view

pytestmark = pytest.mark.django_db(transaction=True)


def write_lines(path: Path, entries: list[object]) -> str:
    path.write_text("\n".join(json.dumps(entry) for entry in entries) + "\n\n")
    return str(path)


def test_a_file_is_saved_and_each_refused_entry_reported(mcp_server: object, team: Team, cli: Cli) -> None:
    env = server_env(mcp_server, "alpha", make_agent(team, "shell-bot", ["read", "write"]).token)  # type: ignore[arg-type]
    entries: list[object] = [
        {"key": f"note-{i}", "content": f"Note number {i} about caching."} for i in range(3)
    ]
    entries += [{"key": "typed", "content": "x", "type": "poem"}]
    path = write_lines(cli.home / "notes.jsonl", entries)

    first = cli("save", "--batch", path, **env)
    again = cli("save", "--batch", path, "--json", **env)

    assert first.returncode == 1, first.stderr
    lines = first.stdout.splitlines()
    assert len(lines) == 2, (first.stdout, first.stderr)
    assert lines[0].startswith("entry 4: typed: unknown_type: "), lines[0]
    assert lines[1] == "3 created, 0 superseded, 0 unchanged, 0 duplicate, 1 error"
    answer = json.loads(again.stdout)
    assert answer["counts"] == {"created": 0, "superseded": 0, "unchanged": 3, "duplicate": 0, "error": 1}
    assert [r["index"] for r in answer["results"]] == [0, 1, 2, 3]
    with operator_view():
        assert Memory.objects.filter(team=team, is_active=True).count() == 3
        assert set(Memory.objects.filter(team=team).values_list("updated_by", flat=True)) == {"shell-bot"}


def test_entries_go_500_a_request_and_under_the_body_limit() -> None:
    small = [{"key": f"k{i}", "content": "x"} for i in range(1201)]
    big = [{"key": f"b{i}", "content": "y" * 200_000} for i in range(10)]

    assert [len(chunk) for chunk in requests_of(small)] == [500, 500, 201]
    assert [len(chunk) for chunk in requests_of(big)] == [4, 4, 2]
    assert [e for chunk in requests_of(small) for e in chunk] == small


def test_a_file_that_is_not_json_lines_sends_nothing(mcp_server: object, team: Team, cli: Cli) -> None:
    env = server_env(mcp_server, "alpha", make_agent(team, "shell-bot", ["read", "write"]).token)  # type: ignore[arg-type]
    path = cli.home / "bad.jsonl"
    path.write_text('{"key": "a", "content": "b"}\n[1, 2]\n')

    run = cli("save", "--batch", str(path), **env)
    both = cli("save", "some-key", "--batch", str(path), **env)
    neither = cli("save", **env)

    assert run.returncode == 1 and run.stderr.strip().endswith(
        "line 2 of " + str(path) + " is not a JSON object"
    )
    assert both.returncode == 1 and "not both" in both.stderr
    assert neither.returncode == 1 and "key" in neither.stderr
    with operator_view():
        assert not Memory.objects.filter(team=team).exists()
