"""A hook cannot hold its client: stdin is read within a time and a size (a client that
never closes it, or writes without end, does not keep the hook), and the requests to the
server share one deadline."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator

import pytest

from memoryhub_client.api import ApiError, MemoryHubApi
from memoryhub_client.claude_code_hooks import MAX_STDIN_BYTES, read_bounded
from memoryhub_client.config import ClientConfig
from tests.client.conftest import COMMAND, RUN_SECONDS, Cli


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    try:
        yield read_end, write_end
    finally:
        for fd in (write_end, read_end):  # the writer first: a reader still waiting sees the end
            with contextlib.suppress(OSError):
                os.close(fd)


def test_a_pipe_left_open_gives_what_came_before_the_time_ran_out(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    os.write(write_end, b'{"session_id": "abc"')  # and the writer never closes it
    assert read_bounded(read_end, max_bytes=MAX_STDIN_BYTES, seconds=0.2) == b'{"session_id": "abc"'


def test_a_writer_without_end_gives_at_most_the_size(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    writer = threading.Thread(target=os.write, args=(write_end, b"x" * 5000), daemon=True)
    writer.start()
    assert read_bounded(read_end, max_bytes=1000, seconds=30) == b"x" * 1000


def test_a_closed_pipe_gives_everything(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    os.write(write_end, b'{"cwd": "/work"}')
    os.close(write_end)
    assert read_bounded(read_end, max_bytes=MAX_STDIN_BYTES, seconds=30) == b'{"cwd": "/work"}'


def test_no_request_starts_past_the_deadline() -> None:
    config = ClientConfig(url="http://127.0.0.1:9", team="alpha", project=None, token="mh_x")
    with MemoryHubApi(config, deadline=0.0) as api, pytest.raises(ApiError, match="no time left"):
        api.get("injection/")


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


HOOKS = [
    ("claude-code", event)
    for event in (
        "session-start", "session-end", "pre-compact", "post-tool-use-failure", "post-tool-use", "user-prompt-submit"
    )
] + [
    ("cursor", event)
    for event in ("session-start", "session-end", "before-submit-prompt", "post-tool-use", "post-tool-use-failure")
] + [("windsurf", "pre-user-prompt")]  # fmt: skip
# What Cursor reads on stdout: JSON, whatever happened.
CURSOR_ANSWERS = {"before-submit-prompt": '{"continue": true}\n'}


@pytest.mark.slow  # runs the `memoryhub` command
def test_a_hook_whose_stdin_stays_open_still_ends_and_exits_0(cli: Cli) -> None:
    """Every hook at once (each waits out its stdin bound, so one after the other they
    took a dozen times as long), each checked on its own."""
    url = f"http://127.0.0.1:{closed_port()}"
    hooks = {
        (client, event): subprocess.Popen(  # noqa: S603
            [COMMAND, "hook", client, event, "--url", url, "--team", "alpha"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**cli.env, "MEMORYHUB_TOKEN": "mh_any-token-0123"},
            cwd=cli.home,
        )
        for client, event in HOOKS
    }
    outputs: dict[tuple[str, str], tuple[int | None, str]] = {}
    try:
        for hook in hooks.values():
            assert hook.stdin is not None
            hook.stdin.write(b'{"session_id": "held-open", "cwd": "')  # half a JSON, then nothing
            hook.stdin.flush()
        for name, hook in hooks.items():
            assert hook.stdout is not None
            # A hang detector, not a speed target: without the bound the hook waits for ever.
            code = hook.wait(timeout=RUN_SECONDS)
            outputs[name] = (code, hook.stdout.read().decode())
    finally:
        for hook in hooks.values():
            if hook.poll() is None:
                hook.kill()
            hook.wait()
            for stream in (hook.stdin, hook.stdout, hook.stderr):
                if stream is not None:
                    stream.close()
    for (client, event), (code, output) in outputs.items():
        assert code == 0, (client, event)
        if client == "cursor" and event == "session-start":
            context = json.loads(output)["additional_context"]
            assert context.startswith("MemoryHub: the team's memory could not be loaded (cannot reach")
        elif client == "cursor":
            assert output == CURSOR_ANSWERS.get(event, "{}\n"), event
        elif event == "session-start":
            assert output.startswith("MemoryHub: the team's memory could not be loaded (cannot reach")
            assert "## Using MemoryHub" in output
        else:
            assert output == "", (client, event)
    assert len(outputs) == len(HOOKS)
