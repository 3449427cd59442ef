"""Helpers for the client command's tests: the installed `memoryhub` script run as an agent
runs it (a subprocess, outside the repository, with only the environment it is given),
against the MCP tests' real server (gunicorn on this run's test database)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mcp.conftest import Server, mcp_server  # noqa: F401 (the fixture, shared)

COMMAND = str(Path(sys.executable).parent / "memoryhub")
RUN_SECONDS = 60  # a hang detector, not a speed target


class Cli:
    """`memoryhub` with a config folder of its own and nothing of the server's settings."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {
            **{
                name: value
                for name, value in os.environ.items()
                # PYTHONPATH: a worktree's checkout runs instead of the installed package.
                if name in {"PATH", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH"}
            },
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
        }

    def __call__(
        self, *arguments: str, input: str | None = None, cwd: Path | None = None, **env: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # noqa: S603
            [COMMAND, *arguments],
            env={**self.env, **env},
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            timeout=RUN_SECONDS,
            cwd=cwd or self.home,
        )


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    home = tmp_path / "home"
    home.mkdir()
    return Cli(home)


def server_env(server: Server, team: str, token: str) -> dict[str, str]:
    return {"MEMORYHUB_URL": server.base, "MEMORYHUB_TEAM": team, "MEMORYHUB_TOKEN": token}
