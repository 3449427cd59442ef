""".env.example documents every environment variable MemoryHub reads, and nothing else.

The variables read are found in the source, not listed by hand: every `env.<kind>("X")`,
`env("X")` and `helper(env, "X", ...)` call of the settings modules (`read_secret` also
reads X_FILE), and every `os.environ.get("X")`, `os.getenv("X")`, `os.environ["X"]` and
`api_key_env="X"` (an embedding profile's key variable) in the apps' code.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import environ
import pytest

from core.settings_env import read_secret

ROOT = Path(__file__).resolve().parent.parent
SETTINGS_MODULES = [ROOT / "memoryhub" / "settings.py", ROOT / "memoryhub" / "settings_test.py"]
APP_PACKAGES = ["core", "teams", "memories", "search", "agents", "dashboard", "memoryhub"]
ENV_EXAMPLE = ROOT / ".env.example"
# Helpers of core.settings_env that read more than the variable they are given.
SECRET_HELPERS = {"read_secret"}
NO_DEFAULT = object()


@dataclass
class Reads:
    """Variable name → the literal defaults it is read with (NO_DEFAULT when it has none
    or the default is computed)."""

    defaults: dict[str, list[object]] = field(default_factory=dict)

    def add(self, name: str, default: object = NO_DEFAULT) -> None:
        self.defaults.setdefault(name, []).append(default)


def _literal(node: ast.expr | None) -> object:
    if node is None:
        return NO_DEFAULT
    try:
        return ast.literal_eval(node)
    except ValueError:
        return NO_DEFAULT


def _string(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_env(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "env"


def _is_os_environ(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def settings_reads(source: str, *, filename: str = "<settings>") -> Reads:
    """Every variable a settings module reads, with its literal default. A read whose
    variable is not a string literal raises: this test could not check it."""
    reads = Reads()
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Call):
            continue
        defaults = {keyword.arg: keyword.value for keyword in node.keywords}
        func = node.func
        on_env = _is_env(func) or (isinstance(func, ast.Attribute) and _is_env(func.value))
        helper_of_env = isinstance(func, ast.Name) and bool(node.args) and _is_env(node.args[0])
        if on_env:
            name = _string(node.args[0]) if node.args else _string(defaults.get("var", ast.Constant(None)))
            if name is None:
                raise AssertionError(f"{filename}:{node.lineno}: env read without a literal variable name")
            reads.add(name, _literal(defaults.get("default")))
        elif helper_of_env:
            assert isinstance(func, ast.Name)
            name = _string(node.args[1]) if len(node.args) > 1 else None
            if name is None:
                raise AssertionError(f"{filename}:{node.lineno}: {func.id}(env, ...) without a literal name")
            # A secret generated when unset has no default worth writing down.
            reads.add(name, "" if func.id in SECRET_HELPERS else NO_DEFAULT)
            if func.id in SECRET_HELPERS:
                reads.add(f"{name}_FILE", "")
    reads_from_os(source, reads, filename=filename)
    return reads


def reads_from_os(source: str, reads: Reads, *, filename: str = "<module>") -> Reads:
    """os.environ.get("X"), os.getenv("X"), os.environ["X"] and api_key_env="X"; reads
    whose name is computed (a profile's own api_key_env) are the profile file's business."""
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Call):
            func = node.func
            is_get = isinstance(func, ast.Attribute) and func.attr == "get" and _is_os_environ(func.value)
            is_getenv = (
                isinstance(func, ast.Attribute)
                and func.attr == "getenv"
                and isinstance(func.value, ast.Name)
                and func.value.id == "os"
            )
            if (is_get or is_getenv) and node.args and (name := _string(node.args[0])):
                reads.add(name, _literal(node.args[1]) if len(node.args) > 1 else NO_DEFAULT)
            for keyword in node.keywords:
                if keyword.arg == "api_key_env" and (name := _string(keyword.value)):
                    reads.add(name, "")
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and _is_os_environ(node.value)
            and (name := _string(node.slice))
        ):
            reads.add(name)
    return reads


def project_reads() -> Reads:
    reads = Reads()
    for module in SETTINGS_MODULES:
        for name, defaults in settings_reads(module.read_text(), filename=str(module)).defaults.items():
            for default in defaults:
                reads.add(name, default)
    for package in APP_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path not in SETTINGS_MODULES:
                reads_from_os(path.read_text(), reads, filename=str(path))
    return reads


@dataclass(frozen=True)
class Listed:
    name: str
    value: str
    comment: str


def env_example_entries(text: str) -> list[Listed]:
    """NAME=value lines, each with the comment line right above it ('' if none)."""
    entries = []
    previous = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            name, sep, value = stripped.partition("=")
            assert sep, f".env.example: not NAME=value: {line!r}"
            comment = previous.lstrip("#").strip() if previous.startswith("#") else ""
            entries.append(Listed(name.strip(), value.strip(), comment))
        previous = stripped
    return entries


def _as_env_text(default: object) -> str:
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, list | tuple):
        return ",".join(str(item) for item in default)
    if isinstance(default, float) and default.is_integer():
        return str(int(default))
    return str(default)


# --- the parser itself ----------------------------------------------------------------


def test_parser_finds_every_kind_of_read() -> None:
    source = """
import os
DEBUG = env.bool("A_BOOL", default=False)
HOSTS = env.list("A_LIST", default=["x", "y"])
DATABASES = {"default": env.db("A_DB")}
PLAIN = env("A_CALL", default="p")
KEY = read_secret(env, "A_SECRET", generated_in=DATA_DIR / "k")
OTHER = some_helper(env, "A_HELPER")
RAW = os.environ.get("A_RAW", "r")
GOT = os.getenv("A_GETENV")
ITEM = os.environ["A_ITEM"]
os.environ.setdefault("NOT_A_READ", "1")
PROFILE = Profile(api_key_env="A_KEY_ENV")
"""
    reads = settings_reads(source)

    assert reads.defaults == {
        "A_BOOL": [False],
        "A_LIST": [["x", "y"]],
        "A_DB": [NO_DEFAULT],
        "A_CALL": ["p"],
        "A_SECRET": [""],
        "A_SECRET_FILE": [""],
        "A_HELPER": [NO_DEFAULT],
        "A_RAW": ["r"],
        "A_GETENV": [NO_DEFAULT],
        "A_ITEM": [NO_DEFAULT],
        "A_KEY_ENV": [""],
    }


def test_parser_refuses_a_settings_read_it_cannot_name() -> None:
    with pytest.raises(AssertionError, match="without a literal variable name"):
        settings_reads('NAME = "X"\nVALUE = env.str(NAME, default="")\n')


def test_read_secret_reads_the_file_variable_the_parser_assumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text("from-the-file\n")
    monkeypatch.delenv("MEMORYHUB_PROBE", raising=False)
    monkeypatch.setenv("MEMORYHUB_PROBE_FILE", str(secret_file))

    value = read_secret(environ.Env(), "MEMORYHUB_PROBE", generated_in=tmp_path / "generated")

    assert value == "from-the-file"
    assert not (tmp_path / "generated").exists()


def test_a_variable_missing_from_env_example_is_caught() -> None:
    reads = settings_reads('X = env.int("MEMORYHUB_NOT_DOCUMENTED", default=3)\n')
    listed = {entry.name for entry in env_example_entries(ENV_EXAMPLE.read_text())}

    assert set(reads.defaults) - listed == {"MEMORYHUB_NOT_DOCUMENTED"}


# --- the project ----------------------------------------------------------------------


def test_env_example_lists_every_variable_memoryhub_reads() -> None:
    listed = {entry.name for entry in env_example_entries(ENV_EXAMPLE.read_text())}

    missing = sorted(set(project_reads().defaults) - listed)

    assert not missing, f"add these to .env.example (with a comment and the default): {missing}"


def test_env_example_lists_nothing_memoryhub_never_reads() -> None:
    listed = {entry.name for entry in env_example_entries(ENV_EXAMPLE.read_text())}

    unread = sorted(listed - set(project_reads().defaults))

    assert not unread, f".env.example lists variables nothing reads: {unread}"


def test_env_example_lists_each_variable_once_under_a_comment() -> None:
    entries = env_example_entries(ENV_EXAMPLE.read_text())
    names = [entry.name for entry in entries]

    assert len(names) == len(set(names)), f"listed twice: {sorted({n for n in names if names.count(n) > 1})}"
    assert [entry.name for entry in entries if not entry.comment] == []


def test_env_example_values_are_the_defaults() -> None:
    reads = project_reads()
    wrong = {}
    for entry in env_example_entries(ENV_EXAMPLE.read_text()):
        for default in reads.defaults.get(entry.name, []):
            if default is not NO_DEFAULT and entry.value != _as_env_text(default):
                wrong[entry.name] = (entry.value, _as_env_text(default))

    assert wrong == {}, "name: (.env.example's value, the default in the code)"


def test_an_anchor_allow_list_with_a_typo_stops_the_start() -> None:
    from core.settings_env import SettingError, check_networks

    assert check_networks("N", ["10.0.0.0/8", " 127.0.0.1 ", "::1"]) == ["10.0.0.0/8", " 127.0.0.1 ", "::1"]
    with pytest.raises(SettingError, match="N lists networks"):
        check_networks("N", ["10.0.0.0/8", "10.0.0/33"])


def test_a_rate_is_read_in_each_spelling_of_its_period_and_a_typo_stops_the_start() -> None:
    from core.settings_env import SettingError, rate_in_seconds, read_rate
    from teams.throttling import rate_item

    spellings = {"5/s": 1, "5/sec": 1, "5/second": 1, "5/m": 60, "5/min": 60, "5/minute": 60}
    spellings |= {"5/h": 3600, "5/hour": 3600, "5/d": 86400, "5/day": 86400}
    spellings["0/min"] = 60  # nothing gets through
    for rate, seconds in spellings.items():
        count = int(rate.split("/")[0])
        assert rate_in_seconds(rate) == (count, seconds)
        assert read_rate(environ.Env(), "R", default=rate) == rate
        # The throttles count the same window as the start-up check read.
        assert (rate_item(rate).amount, rate_item(rate).get_expiry()) == (count, seconds)
    for typo in ("600/mins", "600/minutes", "-1/min", "six/min", "600", "600/"):
        assert rate_in_seconds(typo) is None
        with pytest.raises(SettingError, match="R must look like 600/min"):
            read_rate(environ.Env(), "R", default=typo)
        with pytest.raises(ValueError, match="not a rate"):
            rate_item(typo)


def test_process_counts_follow_the_cores_this_process_may_use(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from core import settings_env

    for cores, web, worker in [(1, 2, 1), (2, 2, 2), (4, 4, 4), (64, 8, 8)]:
        monkeypatch.setattr(os, "sched_getaffinity", lambda _pid, n=cores: set(range(n)))
        assert settings_env.machine_cores() == cores
        assert (settings_env.default_processes(at_least=2), settings_env.default_processes()) == (web, worker)
