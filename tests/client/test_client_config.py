"""Where the client finds its server, team and token: flags, then the environment, then
`$XDG_CONFIG_HOME/memoryhub/config.toml`; the token never shows."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from memoryhub_client.config import ConfigError, add_connection_flags, load_config
from tests.client.conftest import Cli

TOKEN = "mh_config-file-token-0123456789"


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--project")
    add_connection_flags(parser)
    return parser.parse_args(argv)


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("MEMORYHUB_URL", "MEMORYHUB_TEAM", "MEMORYHUB_TOKEN", "MEMORYHUB_PROJECT", "OTHER_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    folder = tmp_path / "xdg" / "memoryhub"
    folder.mkdir(parents=True)
    return folder


def test_flags_win_over_the_environment_which_wins_over_the_config_file(
    config_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (config_home / "config.toml").write_text(
        f'url = "https://file.example/mcp/"\nteam = "file-team"\nproject = "file-project"\ntoken = "{TOKEN}"\n'
    )
    from_file = load_config(parse())
    assert (from_file.url, from_file.team, from_file.project, from_file.token) == (
        "https://file.example", "file-team", "file-project", TOKEN
    )  # fmt: skip

    monkeypatch.setenv("MEMORYHUB_URL", "https://env.example")
    monkeypatch.setenv("MEMORYHUB_TEAM", "env-team")
    monkeypatch.setenv("MEMORYHUB_TOKEN", "mh_from-env")
    monkeypatch.setenv("OTHER_TOKEN", "mh_from-other-env")
    from_env = load_config(parse())
    assert (from_env.url, from_env.team, from_env.project, from_env.token) == (
        "https://env.example", "env-team", "file-project", "mh_from-env"
    )  # fmt: skip
    assert load_config(parse("--token-env", "OTHER_TOKEN")).token == "mh_from-other-env"

    flagged = load_config(
        parse("--url", "http://flag.example:8000/", "--team", "flag-team", "--project", "p")
    )
    assert (flagged.url, flagged.team, flagged.project) == ("http://flag.example:8000", "flag-team", "p")


def test_missing_settings_and_bad_files_are_one_clear_line(config_home: Path) -> None:
    with pytest.raises(ConfigError, match="no team: pass --team, set MEMORYHUB_TEAM"):
        load_config(parse()).require_team()
    with pytest.raises(ConfigError, match="no token: set MEMORYHUB_TOKEN"):
        load_config(parse()).require_token()
    with pytest.raises(ConfigError, match="must start with http"):
        load_config(parse("--url", "ftp://x"))
    (config_home / "config.toml").write_text(f'token = "{TOKEN}"\nteam = \n')
    with pytest.raises(ConfigError, match="cannot read") as error:
        load_config(parse())
    assert TOKEN not in str(error.value)


@pytest.mark.slow
def test_the_token_from_the_config_file_is_used_and_never_printed(config_home: Path, cli: Cli) -> None:
    (cli.home / ".config" / "memoryhub").mkdir(parents=True)
    (cli.home / ".config" / "memoryhub" / "config.toml").write_text(
        f'url = "http://127.0.0.1:9"\nteam = "alpha"\ntoken = "{TOKEN}"\n'
    )
    assert TOKEN not in repr(load_config(parse("--token", TOKEN)))

    for run in (
        cli("get", "k"),
        cli("search", "anything"),
        cli("save", "k", "text"),
        cli("inject", "--into", "X.md"),
    ):
        assert run.returncode == 1
        # The config file's URL and team were used (a token missing would stop it earlier).
        assert "cannot reach http://127.0.0.1:9" in run.stderr
        assert TOKEN not in run.stdout + run.stderr
