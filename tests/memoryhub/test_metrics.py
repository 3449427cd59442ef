"""Prometheus `/metrics` (docs/operations.md, "Metrics"): only with the
bearer token, counts by URL pattern name (never a path), search paths, index states per
team by slug, queue depth, task and beat outcomes, 429s, nothing secret in the output;
and under a real gunicorn of two processes, one total for both."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from django.test import Client
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from memoryhub import embedded_redis as embedded
from search.tasks import reconcile_index_states
from teams.throttling import limiter
from tests.conftest import Agent, search
from tests.web_server import REPO, WebServer, send_rounds_until, server_env
from tests.worker import TaskRoute, database_url, wait_for

TOKEN = "metrics-token-9f8e7d6c5b4a"
TASK_SECONDS = 60.0  # a hang detector, not a speed target
SECRET_CONTENT = "The launch code for the staging cluster is swordfish-1234."
SECRET_KEY = "launch-code-staging"


@pytest.fixture
def token(settings: Any) -> str:
    settings.MEMORYHUB_METRICS_TOKEN = TOKEN
    return TOKEN


def scrape(token: str = TOKEN) -> str:
    response = Client().get("/metrics", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.content
    return response.content.decode()


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    return [
        (sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]


def value(text: str, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 when there is none)."""
    return sum(v for found, v in samples(text, name) if labels.items() <= found.items())


@pytest.mark.django_db
def test_metrics_is_a_404_without_the_token_and_prometheus_text_with_it(token: str) -> None:
    client = Client()
    refused = [
        client.get("/metrics"),
        client.get("/metrics", headers={"Authorization": "Bearer wrong-token"}),
        client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}x"}),
        client.get("/metrics", headers={"Authorization": f"Basic {TOKEN}"}),
        client.get("/metrics", headers={"Authorization": TOKEN}),
    ]
    for response in refused:
        assert response.status_code == 404
        assert response.json() == {"error": "not_found", "detail": "not found"}
        assert TOKEN not in response.content.decode()

    answered = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert answered.status_code == 200
    assert answered["Content-Type"].startswith("text/plain; version=")
    names = {family.name for family in text_string_to_metric_families(answered.content.decode())}
    assert {"memoryhub_http_requests", "memoryhub_http_request_duration_seconds"} <= names


@pytest.mark.django_db
def test_metrics_is_off_while_the_setting_is_empty(settings: Any) -> None:
    settings.MEMORYHUB_METRICS_TOKEN = ""
    for header in ({}, {"Authorization": "Bearer "}, {"Authorization": "Bearer anything"}):
        response = Client().get("/metrics", headers=header)
        assert response.status_code == 404
        assert response.json() == {"error": "not_found", "detail": "not found"}


def test_an_api_request_is_counted_under_its_route_name_not_its_path(token: str, member: Agent) -> None:
    labels = {"route": "memory-detail", "method": "GET", "status": "200"}
    member.client.post(member.url("memories/"), {"key": SECRET_KEY, "content": SECRET_CONTENT}, format="json")
    before = scrape()

    assert member.client.get(member.url(f"memories/{SECRET_KEY}/")).status_code == 200
    assert member.client.get(member.url("memories/no-such-key/")).status_code == 404

    after = scrape()
    assert (
        value(after, "memoryhub_http_requests_total", **labels)
        == value(before, "memoryhub_http_requests_total", **labels) + 1
    )
    assert (
        value(after, "memoryhub_http_request_duration_seconds_count", **labels)
        == value(before, "memoryhub_http_request_duration_seconds_count", **labels) + 1
    )
    assert value(after, "memoryhub_http_requests_total", route="memory-detail", status="404") >= 1
    routes = {found["route"] for found, _ in samples(after, "memoryhub_http_requests_total")}
    assert not {route for route in routes if "/" in route or member.team.slug in route or SECRET_KEY in route}


def test_a_search_observes_the_keyword_vector_and_merge_paths(token: str, member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "deploy-friday", "Never deploy to production on Fridays: nobody is around to fix it.")
    name = "memoryhub_search_path_duration_seconds_count"
    before = scrape()

    outcome = search(member, "Can we deploy to production on Friday?")
    assert outcome["search_mode"] == "hybrid"
    search(member, "deploy production", mode="keyword")

    after = scrape()
    for path in ("keyword", "vector", "merge"):
        assert (
            value(after, name, mode="hybrid", path=path) == value(before, name, mode="hybrid", path=path) + 1
        )
    assert (
        value(after, name, mode="keyword", path="keyword")
        == value(before, name, mode="keyword", path="keyword") + 1
    )
    assert value(after, name, mode="keyword", path="vector") == value(
        before, name, mode="keyword", path="vector"
    )
    ok = "memoryhub_query_embedding_duration_seconds_count"
    assert value(after, ok, outcome="ok") == value(before, ok, outcome="ok") + 1


def test_index_states_are_counted_per_team_slug_and_reveal_nothing_else(
    token: str, member: Agent, outsider: Agent, save
) -> None:  # type: ignore[no-untyped-def]
    save(member, "indexed-one", "An entry the in-process indexing has indexed.")
    save(member, "indexed-two", "Another entry the in-process indexing has indexed.")
    # Saved without running what it enqueued after commit: still pending.
    response = outsider.client.post(
        outsider.url("memories/"), {"key": SECRET_KEY, "content": SECRET_CONTENT}, format="json"
    )
    assert response.status_code == 201

    text = scrape()
    found = samples(text, "memoryhub_index_entries")
    assert ({"team": "alpha", "state": "indexed"}, 2.0) in found
    assert ({"team": "bravo", "state": "pending"}, 1.0) in found
    for labels, _ in found:
        assert set(labels) == {"team", "state"}
        assert labels["team"] in {"alpha", "bravo"}
        assert labels["state"] in {"pending", "indexed", "failed"}
    for secret in (SECRET_KEY, SECRET_CONTENT, "swordfish", TOKEN, member.token, outsider.token):
        assert secret not in text


def test_429s_are_counted_by_throttle_scope(token: str, member: Agent, settings: Any) -> None:
    settings.MEMORYHUB_THROTTLE_READ = "1/min"
    limiter().storage.reset()
    before = scrape()
    statuses = [member.client.get(member.url("memories/")).status_code for _ in range(3)]
    limiter().storage.reset()
    assert statuses == [200, 429, 429]
    after = scrape()
    name = "memoryhub_throttled_requests_total"
    assert value(after, name, scope="agent_read") == value(before, name, scope="agent_read") + 2
    assert (
        value(after, "memoryhub_http_requests_total", route="memory-list", status="429")
        == value(before, "memoryhub_http_requests_total", route="memory-list", status="429") + 2
    )


@pytest.mark.django_db
def test_queue_depth_counts_every_priority_of_the_queue(
    token: str, settings: Any, embedded_redis: embedded.EmbeddedRedis, task_route: TaskRoute
) -> None:
    queue = f"metrics-test-{os.getpid()}"
    settings.REDIS_URL = embedded_redis.url
    settings.CELERY_TASK_DEFAULT_QUEUE = queue
    task_route.to(embedded_redis.url, queue)  # no worker reads this queue
    client = redis.Redis(unix_socket_path=str(embedded.socket_path(embedded_redis.folder)))
    try:
        assert value(scrape(), "memoryhub_queue_depth", queue=queue) == 0
        reconcile_index_states.delay()
        reconcile_index_states.delay()
        reconcile_index_states.apply_async(priority=9)
        assert client.llen(f"{queue}\x06\x169") == 1  # kombu's list for that priority
        assert value(scrape(), "memoryhub_queue_depth", queue=queue) == 3
    finally:
        for key in client.scan_iter(match=f"{queue}*"):
            client.delete(key)
        client.close()


@pytest.mark.django_db(transaction=True)
def test_the_workers_task_and_beat_outcomes_reach_the_metrics_files(
    start_worker: Any, tmp_path: Path
) -> None:
    """A real worker (prefork) writes its values to the `worker` folder that `/metrics`
    reads with the web server's: a task's outcome and duration, and a beat job's."""
    metrics = tmp_path / "metrics"
    start_worker(MEMORYHUB_METRICS_DIR=str(metrics), MEMORYHUB_METRICS_TOKEN=TOKEN)
    reconcile_index_states.delay()
    reconcile_index_states.apply_async(headers={"periodic_task_name": "reconcile index states"})
    task = "search.reconcile_index_states"

    def read() -> dict[str, float]:
        files = [str(path) for path in (metrics / "worker").glob("*.db")]
        found: dict[str, float] = {}
        for family in MultiProcessCollector.merge(files, accumulate=True):
            for sample in family.samples:
                if sample.labels.get("task") == task or sample.labels.get("job") == "reconcile index states":
                    key = sample.name + json.dumps(sample.labels, sort_keys=True)
                    found[key] = sample.value
        return found

    def counted() -> bool:
        found = read()
        return found.get(f'memoryhub_tasks_total{{"outcome": "SUCCESS", "task": "{task}"}}', 0) == 2

    wait_for(counted, TASK_SECONDS, "the worker's task metrics")
    found = read()
    assert found[f'memoryhub_task_duration_seconds_count{{"outcome": "SUCCESS", "task": "{task}"}}'] == 2
    assert found['memoryhub_beat_job_runs_total{"job": "reconcile index states", "outcome": "SUCCESS"}'] == 1
    assert found['memoryhub_beat_job_last_success_timestamp_seconds{"job": "reconcile index states"}'] > 0


@pytest.fixture
def two_process_server(
    django_db_setup: None, django_db_blocker: Any, tmp_path: Path
) -> Iterator[tuple[str, Path]]:
    """gunicorn with the deployment's config and two worker processes, on this run's
    test database, keeping its metrics in tmp_path."""
    with django_db_blocker.unblock():
        url = database_url()
    metrics = tmp_path / "metrics"
    env = server_env(
        url,
        MEMORYHUB_METRICS_DIR=str(metrics),
        MEMORYHUB_METRICS_TOKEN=TOKEN,
        MEMORYHUB_DB_POOL_MAX="2",
        MEMORYHUB_THROTTLE_ANONYMOUS="100000/min",
        WEB_CONCURRENCY="2",
    )
    # A file left by an earlier run is wiped as the server starts.
    (metrics / "web").mkdir(parents=True)
    (metrics / "web" / "counter_1.db").write_bytes(b"stale")
    server = WebServer(env, tmp_path / "gunicorn.log")
    server.start(ready_path="/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        yield server.base, metrics / "web"
    finally:
        server.stop()


@pytest.mark.slow
def test_under_gunicorn_both_processes_requests_are_summed(two_process_server: tuple[str, Path]) -> None:
    base, folder = two_process_server
    route = {"route": "memory-list", "method": "GET"}
    assert not (folder / "counter_1.db").exists()

    def per_process() -> dict[str, float]:
        """Requests to the route counted in each process's own file."""
        counts: dict[str, float] = {}
        for path in folder.glob("counter_*.db"):
            for family in MultiProcessCollector.merge([str(path)], accumulate=True):
                counts[path.name] = sum(
                    s.value
                    for s in family.samples
                    if s.name == "memoryhub_http_requests_total" and route.items() <= s.labels.items()
                )
        return {name: count for name, count in counts.items() if count}

    statuses: list[int] = []
    # A new connection for each request (a kept-alive one stays with the process that
    # accepted it), several at once, until both processes have answered some.
    with httpx.Client(base_url=base, timeout=30, limits=httpx.Limits(max_keepalive_connections=0)) as client:

        def send_round() -> None:
            with ThreadPoolExecutor(16) as pool:
                statuses.extend(
                    pool.map(lambda _: client.get("/api/v1/teams/nope/memories/").status_code, range(32))
                )

        send_rounds_until(lambda: len(per_process()) >= 2, send_round, rounds=50)
        assert set(statuses) == {401}, statuses
        sent = len(statuses)
        counts = per_process()
        assert len(counts) >= 2, counts
        text = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text
        # The scrape read the database through the pool: the next one shows its sample.
        pools = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text
    assert value(text, "memoryhub_http_requests_total", **route) == sent == sum(counts.values())
    assert value(text, "memoryhub_http_request_duration_seconds_count", **route) == sent
    assert value(pools, "memoryhub_db_pool_connections", alias="default", state="max") in (2, 4)
    assert value(pools, "memoryhub_db_pool_connections", alias="default", state="open") >= 1
    assert TOKEN not in text
    assert not re.search(r'route="[^"]*/', text)


SAMPLE_SUFFIXES = {"counter": ["_total"], "histogram": ["_bucket", "_count", "_sum"], "gauge": [""]}


def test_the_grafana_dashboard_reads_only_metrics_that_metrics_exposes(
    token: str,
    settings: Any,
    member: Agent,
    embedded_redis: embedded.EmbeddedRedis,
) -> None:
    """docs/grafana-memoryhub.json is valid JSON, has the panels the operator needs, and
    every metric its queries name is one `/metrics` exposes."""
    dashboard = json.loads((REPO / "docs" / "grafana-memoryhub.json").read_text())
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    used = {name for expr in expressions for name in re.findall(r"\bmemoryhub_[a-z_]+\b", expr)}

    # Collected metrics appear only with something to report: an entry and a broker.
    member.client.post(member.url("memories/"), {"key": "k", "content": "An entry."}, format="json")
    settings.REDIS_URL = embedded_redis.url
    exposed = {
        family.name + suffix
        for family in text_string_to_metric_families(scrape())
        for suffix in SAMPLE_SUFFIXES[family.type]
    }
    assert used <= exposed, used - exposed
    for needed in (
        "memoryhub_http_requests_total",
        "memoryhub_http_request_duration_seconds_bucket",
        "memoryhub_search_path_duration_seconds_bucket",
        "memoryhub_index_entries",
        "memoryhub_queue_depth",
        "memoryhub_tasks_total",
        "memoryhub_throttled_requests_total",
    ):
        assert needed in used
