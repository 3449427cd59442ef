"""docker-compose.yml, read as data (no Docker engine runs where the suite runs, so
`docker compose config` cannot): the production stack runs the embedded server's
PostgreSQL major version, so a backup of `make run` restores into it (the restore drill
itself, embedded cluster to a fresh embedded cluster, is tests/memoryhub/
test_backup_restore.py); one image is built and shared; Redis keeps its queue on a
volume; nothing starts before the databases are healthy and the migrations are done; a
one-shot bootstrap prints the first owner's link and token as `make run` does."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from django.conf import settings

from memoryhub import embedded_postgres

COMPOSE_FILE = Path(__file__).resolve().parents[1] / "docker-compose.yml"
APP_SERVICES = ("migrate", "bootstrap", "web", "worker", "beat")
LONG_RUNNING = ("db", "redis", "web", "worker", "beat")
# Compose's conditions of a long-form depends_on.
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE_FILE.read_text())  # resolves the `<<` merges as compose does
    assert isinstance(loaded, dict)
    return loaded


def command_of(service: dict[str, Any]) -> list[str]:
    command = service.get("command", [])
    return shlex.split(command) if isinstance(command, str) else list(command)


def test_compose_runs_the_postgresql_major_version_of_the_embedded_server(compose: dict[str, Any]) -> None:
    image = compose["services"]["db"]["image"]
    tag = re.fullmatch(r"pgvector/pgvector:(?:[\d.]+-)?pg(\d+)(?:-\w+)?", image)
    assert tag is not None, f"not a pgvector image with a PostgreSQL major version: {image}"
    embedded = embedded_postgres.ensure_running(settings.DATA_DIR)["default"]

    with psycopg.connect(
        host=str(embedded["HOST"]),
        user=str(embedded["USER"]),
        password=str(embedded["PASSWORD"]),
        dbname=str(embedded["NAME"]),
    ) as conn:
        row = conn.execute("SHOW server_version_num").fetchone()

    assert row is not None
    assert int(tag.group(1)) == int(row[0]) // 10000


def test_postgresql_keeps_its_cluster_where_the_image_of_that_version_puts_it(
    compose: dict[str, Any],
) -> None:
    # From PostgreSQL 18 the images keep the cluster in /var/lib/postgresql/MAJOR/docker
    # and refuse to start on a volume mounted at the old /var/lib/postgresql/data.
    mounts = [str(volume).split(":") for volume in compose["services"]["db"]["volumes"]]

    data = [mount for mount in mounts if mount[1].startswith("/var/lib/postgresql")]
    assert [mount[1] for mount in data] == ["/var/lib/postgresql"]
    assert data[0][0] in compose["volumes"]


def test_one_image_is_built_once_and_shared_by_every_memoryhub_service(compose: dict[str, Any]) -> None:
    services = compose["services"]
    built = [name for name, service in services.items() if "build" in service]

    assert built == ["migrate"]  # the one every other MemoryHub service waits for
    image = services["migrate"]["image"]
    assert image and not image.startswith(("pgvector/", "redis"))
    assert {name: services[name].get("image") for name in APP_SERVICES} == dict.fromkeys(APP_SERVICES, image)


def test_redis_keeps_its_queue_on_a_volume_and_reports_its_health(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]

    assert any(str(volume).split(":")[1] == "/data" for volume in redis["volumes"])
    assert str(redis["volumes"][0]).split(":")[0] in compose["volumes"]
    # Append-only, as the embedded Redis: tasks queued before a restart are delivered after it.
    assert command_of(redis)[command_of(redis).index("--appendonly") + 1] == "yes"
    assert "redis-cli ping" in " ".join(redis["healthcheck"]["test"])


def test_memoryhub_services_wait_for_healthy_databases_and_completed_migrations(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    healthy = {"condition": "service_healthy"}

    assert services["migrate"]["depends_on"] == {"db": healthy, "redis": healthy}
    for name in ("bootstrap", "web", "worker", "beat"):
        assert services[name]["depends_on"] == {
            "db": healthy,
            "redis": healthy,
            "migrate": {"condition": "service_completed_successfully"},
        }, name
    # The first start's init scripts run on a server listening on its socket only: a check
    # over TCP is healthy only once they are done and the roles exist.
    db_check = services["db"]["healthcheck"]["test"]
    assert "pg_isready" in db_check and db_check[db_check.index("-h") + 1] == "127.0.0.1"


def test_a_one_shot_bootstrap_prints_the_first_owner_link_and_token(compose: dict[str, Any]) -> None:
    bootstrap = compose["services"]["bootstrap"]

    assert command_of(bootstrap) == ["python", "manage.py", "bootstrap", "--if-empty"]
    assert bootstrap["restart"] == "no"
    # The links it prints start with the address people open.
    assert "MEMORYHUB_BASE_URL" in bootstrap["environment"]
    # Logged in as the application role, as web is; only migrate logs in as the owner.
    assert "memoryhub_app:" in bootstrap["environment"]["DATABASE_URL"]
    assert "memoryhub_owner:" in compose["services"]["migrate"]["environment"]["DATABASE_URL"]


def test_long_running_services_restart_and_one_shot_jobs_do_not(compose: dict[str, Any]) -> None:
    services = compose["services"]

    assert {name: services[name].get("restart") for name in LONG_RUNNING} == dict.fromkeys(
        LONG_RUNNING, "unless-stopped"
    )
    assert services["migrate"]["restart"] == services["bootstrap"]["restart"] == "no"


def test_the_file_hangs_together(compose: dict[str, Any]) -> None:
    """What `docker compose config` would refuse: dependencies on services that do not
    exist, a health condition on a service without a health check, undeclared volumes
    and configs, a service with neither an image nor a build."""
    services = compose["services"]
    for name, service in services.items():
        assert "image" in service or "build" in service, name
        for other, dependency in service.get("depends_on", {}).items():
            assert other in services and other != name, (name, other)
            assert dependency["condition"] in CONDITIONS, (name, other)
            if dependency["condition"] == "service_healthy":
                assert "healthcheck" in services[other], (name, other)
            if dependency["condition"] == "service_completed_successfully":
                assert services[other].get("restart") == "no", (name, other)
        for volume in service.get("volumes", []):
            source = str(volume).split(":")[0]
            assert source.startswith(".") or source in compose["volumes"], (name, source)
        for config in service.get("configs", []):
            assert config["source"] in compose.get("configs", {}), (name, config)
        environment = service.get("environment", {})
        assert isinstance(environment, dict), name
        assert all(isinstance(value, str) for value in environment.values()), name
