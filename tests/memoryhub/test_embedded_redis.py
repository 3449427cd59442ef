"""The embedded Redis that `make run` and the test suite start: the wheel's redis-server,
on a private unix socket only, keeping queued tasks across a restart."""

from __future__ import annotations

import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from memoryhub import embedded_redis as embedded

pytestmark = pytest.mark.slow  # redis-server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[embedded.EmbeddedRedis]:
    running = embedded.start(tmp_path / "redis")
    yield running
    running.stop()


def client_for(folder: Path) -> redis.Redis:
    return redis.Redis(unix_socket_path=str(embedded.socket_path(folder)))


def test_it_listens_on_a_socket_only_its_owner_can_use_and_on_no_port(server: embedded.EmbeddedRedis) -> None:
    socket = embedded.socket_path(server.folder)

    assert server.url == f"redis+socket://{socket}"
    assert stat.S_ISSOCK(socket.stat().st_mode)
    assert stat.S_IMODE(socket.stat().st_mode) == 0o700
    assert client_for(server.folder).config_get("port") == {"port": "0"}


def test_queued_tasks_survive_a_restart(tmp_path: Path) -> None:
    folder = tmp_path / "redis"
    first = embedded.start(folder)
    client_for(folder).lpush("memoryhub", "a queued task")
    first.stop()  # SIGTERM, as the supervisor sends it
    assert not embedded.ping(folder)

    second = embedded.start(folder)
    try:
        assert client_for(folder).lrange("memoryhub", 0, -1) == [b"a queued task"]
    finally:
        second.stop()
    assert (folder / "appendonly.aof").exists()


def test_a_second_server_on_the_same_folder_is_refused(server: embedded.EmbeddedRedis) -> None:
    with pytest.raises(embedded.EmbeddedRedisError, match="already runs"):
        embedded.start(server.folder)
    assert embedded.ping(server.folder)


def test_stop_shuts_down_the_server_of_a_folder_and_only_says_so_when_one_ran(
    server: embedded.EmbeddedRedis,
) -> None:
    assert embedded.stop(server.folder) is True
    server.process.wait(10)

    assert not embedded.ping(server.folder)
    assert embedded.stop(server.folder) is False


def test_a_folder_too_deep_for_a_socket_gets_one_in_the_temp_directory(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60) / "redis"

    socket = embedded.socket_path(deep)

    assert len(str(deep / "redis.sock")) > 108
    assert socket.name == "redis.sock" and len(str(socket)) <= 100
    assert embedded.socket_path(deep) == socket  # the same folder always finds it again
    assert embedded.socket_path(tmp_path / "other") != socket
    running = embedded.start(deep)
    try:
        assert embedded.ping(deep)
        assert (deep / "redis.pid").exists()
    finally:
        running.stop()


def test_the_command_line_prints_the_url_and_waits_for_a_broker(server: embedded.EmbeddedRedis) -> None:
    def run(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # noqa: S603
            [sys.executable, "-m", "memoryhub.embedded_redis", *arguments],
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert run("url", str(server.folder)).stdout.strip() == server.url
    assert run("check", str(server.folder)).returncode == 0
    assert run("wait", server.url).returncode == 0
    refused = run("serve", str(server.folder))
    assert refused.returncode == 1 and "already runs" in refused.stderr
