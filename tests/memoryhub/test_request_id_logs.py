"""Request ids and JSON logs: every response names its request, the id follows
the request into the worker's log lines for the tasks it enqueued, and JSON log lines
hold only scrubbed fields."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from django.conf import settings

from core.request_id import HEADER
from tests.conftest import Agent
from tests.worker import CeleryProcess, wait_for, wait_for_index_state

REPO = Path(__file__).resolve().parents[2]
CREDENTIAL = "sk-proj-" + "Q7" * 24


def test_every_response_carries_a_generated_request_id(member: Agent) -> None:
    first = member.client.get(member.url("memories/"))
    second = member.client.get(member.url("memories/"))

    ids = [first.headers[HEADER], second.headers[HEADER]]
    assert all(len(value) == 32 and int(value, 16) >= 0 for value in ids)
    assert ids[0] != ids[1]


def test_a_plain_request_id_from_the_client_or_proxy_is_kept(member: Agent) -> None:
    response = member.client.get(member.url("memories/"), headers={HEADER: "edge-7f3a.run_2"})

    assert response.headers[HEADER] == "edge-7f3a.run_2"


@pytest.mark.parametrize(
    "offered", ["a" * 65, "two words", "line\nbreak", 'quote"d', "naïve", "\x00"], ids=repr
)
def test_a_request_id_that_is_not_a_plain_token_is_replaced(member: Agent, offered: str) -> None:
    response = member.client.get(member.url("memories/"), headers={HEADER: offered})

    assert response.status_code == 200
    assert response.headers[HEADER] != offered
    assert len(response.headers[HEADER]) == 32


def run_with_real_settings(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    process_env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    process_env.update(
        DJANGO_SETTINGS_MODULE="memoryhub.settings", MEMORYHUB_DATA_DIR=str(settings.DATA_DIR), **env
    )
    return subprocess.run(  # noqa: S603
        [sys.executable, "-c", "import django; django.setup()\n" + code],
        cwd=REPO,
        env=process_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_json_log_lines_carry_the_request_id_and_only_scrubbed_fields() -> None:
    finished = run_with_real_settings(
        f"""
import logging
from core.request_id import current_request_id
current_request_id.set("req-42")
log = logging.getLogger("memoryhub.drill")
log.warning("token %s", "{CREDENTIAL}", extra={{"data": {{"args": ["{CREDENTIAL}"]}}}})
try:
    raise ValueError("key {CREDENTIAL}")
except ValueError:
    log.exception("failed")
""",
        LOG_FORMAT="json",
    )

    assert finished.returncode == 0, finished.stderr
    lines = [json.loads(line) for line in finished.stderr.splitlines() if line.startswith("{")]
    drill = [line for line in lines if line["logger"] == "memoryhub.drill"]
    assert [line["level"] for line in drill] == ["WARNING", "ERROR"]
    assert all(line["request_id"] == "req-42" for line in drill)
    assert drill[0]["message"].startswith("token [REDACTED")
    assert "data" not in drill[0]  # extra values are never printed: nothing scrubs them
    assert "ValueError: key [REDACTED" in drill[1]["exc_info"]
    assert drill[0]["time"].endswith("+00:00")
    assert CREDENTIAL not in finished.stderr


@pytest.mark.slow
def test_plain_log_lines_name_the_request_too() -> None:
    finished = run_with_real_settings(
        'import logging\nfrom core.request_id import current_request_id\ncurrent_request_id.set("req-7")\n'
        'logging.getLogger("memoryhub.drill").warning("plain")'
    )

    assert finished.returncode == 0, finished.stderr
    assert "WARNING memoryhub.drill [req-7] plain" in finished.stderr


@pytest.mark.slow
def test_an_unknown_log_format_is_refused_at_start_up() -> None:
    finished = run_with_real_settings("", LOG_FORMAT="xml")

    assert finished.returncode != 0
    assert "LOG_FORMAT must be plain or json" in finished.stderr


@pytest.mark.django_db(transaction=True)
def test_the_request_id_follows_a_save_into_the_worker_that_indexes_it(
    member: Agent, start_worker: Callable[..., CeleryProcess]
) -> None:
    worker = start_worker(LOG_FORMAT="json", LOG_LEVEL="INFO")
    position = worker.log_position()

    response = member.client.post(
        member.url("memories/"),
        {"key": "traced", "content": "Deploys go out on Tuesdays after the freeze."},
        format="json",
        headers={HEADER: "trace-save-1"},
    )

    assert response.status_code == 201
    assert response.headers[HEADER] == "trace-save-1"
    wait_for_index_state(member.team.id, "traced")

    def task_lines() -> list[dict[str, object]]:
        lines = (json.loads(line) for line in worker.log_since(position).splitlines() if line.startswith("{"))
        return [line for line in lines if "search.index_memory" in str(line.get("message"))]

    def run_lines() -> list[dict[str, object]]:
        # The worker's own "received" line comes before the task runs, without the id.
        return [line for line in task_lines() if "succeeded" in str(line["message"])]

    wait_for(lambda: bool(run_lines()), 30, "the task's log line")
    assert [line["request_id"] for line in run_lines()] == ["trace-save-1"]
