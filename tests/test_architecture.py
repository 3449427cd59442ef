"""docs/architecture.md lists every hook, and every hook has a receiver once Django is up.

A hook nobody registers into is a call that silently does nothing (a saved memory never
indexed, a shut-down team's sessions left behind); a hook missing from the map is a path
through the floors a newcomer cannot see. Bookkeeping every floor shares sits low enough
that no hook carries it up (every beat job records its runs with teams.jobs), and no
module grows past 600 lines.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
from pathlib import Path
from types import ModuleType

from django.apps import apps

from core.hook import Hook
from memoryhub.celery import app as celery_app

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def project_apps() -> list[str]:
    """The installed apps that live in this repository, and core (not an installed app)."""
    names = [config.name for config in apps.get_app_configs() if Path(config.path).parent == ROOT]
    return ["core", *names]


def hooks_modules() -> list[ModuleType]:
    return [
        importlib.import_module(f"{app}.hooks")
        for app in project_apps()
        if importlib.util.find_spec(f"{app}.hooks") is not None
    ]


def declared_hooks() -> list[Hook]:
    return [value for module in hooks_modules() for value in vars(module).values() if isinstance(value, Hook)]


def hook_problems(hooks: list[Hook], doc: str) -> list[str]:
    """What is wrong with these hooks against the architecture page's text."""
    problems = []
    for hook in hooks:
        if f"`{hook.name}`" not in doc:
            problems.append(f"{hook.name}: not listed in docs/architecture.md")
        if not hook.receivers:
            problems.append(f"{hook.name}: no receiver registered (an AppConfig.ready() should add one)")
        for receiver in hook.receivers:
            where = f"{receiver.__module__}.{receiver.__qualname__}"
            if f"`{where}`" not in doc:
                problems.append(f"{hook.name}: receiver {where} not listed in docs/architecture.md")
    return problems


def _receiver(**kwargs: object) -> None:
    return None


def test_the_check_reports_an_unlisted_hook_and_one_without_receivers() -> None:
    listed = Hook("demo.listed", "listed, with a listed receiver")
    listed.register(_receiver)
    lonely = Hook("demo.lonely", "listed, nobody registers")
    unlisted = Hook("demo.unlisted", "not in the page")
    unlisted.register(_receiver)
    doc = f"`demo.listed` `demo.lonely` `{__name__}._receiver`"

    assert hook_problems([listed, lonely, unlisted], doc) == [
        "demo.lonely: no receiver registered (an AppConfig.ready() should add one)",
        "demo.unlisted: not listed in docs/architecture.md",
    ]
    assert hook_problems([listed], "`demo.listed`") == [
        f"demo.listed: receiver {__name__}._receiver not listed in docs/architecture.md"
    ]


def test_the_apps_declare_the_hooks_the_page_describes() -> None:
    assert apps.ready
    names = {hook.name for hook in declared_hooks()}

    # Found by walking the apps' hooks modules, not listed by hand: these are the ones
    # the page's table was written for, so a new one shows up here too.
    assert names >= {
        "teams.team_shutdown",
        "teams.agent_request",
        "memories.memory_written",
        "memories.find_duplicate",
    }


def test_every_hook_is_documented_and_has_a_receiver() -> None:
    assert apps.ready

    assert hook_problems(declared_hooks(), ARCHITECTURE.read_text()) == []


def test_hooks_are_declared_only_in_hooks_modules() -> None:
    """Hooks found anywhere else would escape the two checks above."""
    elsewhere = []
    for app in project_apps():
        for path in sorted((ROOT / app).rglob("*.py")):
            if path.name == "hooks.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Hook":
                    elsewhere.append(f"{path.relative_to(ROOT)}:{node.lineno}")

    assert elsewhere == []


def scheduled_tasks() -> list[str]:
    """The tasks of every beat job the migrations schedule."""
    jobs = [
        *importlib.import_module("freshness.migrations.0004_default_beat_schedule").DEFAULT_JOBS,
        importlib.import_module("freshness.migrations.0006_anchor_check_job").ANCHOR_JOB,
    ]
    return sorted(task for _, task, _, _ in jobs)


def test_every_beat_job_records_its_runs_itself_whatever_its_floor() -> None:
    """teams.jobs.recorded_run is on the lowest floor with tables, so search's reconcile job
    (floor 3) records its runs as freshness's (floor 4) and agents' (floor 5) do, with no
    hook to carry them up."""
    celery_app.loader.import_default_modules()
    tasks = scheduled_tasks()

    assert "search.reconcile_index_states" in tasks
    assert [
        task for task in tasks if "recorded_run(" not in inspect.getsource(celery_app.tasks[task].run)
    ] == []


MAX_MODULE_LINES = 600
# Written by `make sdk` from the OpenAPI schema, one TypedDict per answer: read by
# type checkers, not by people, so its length follows the API's.
GENERATED_MODULES = {"memoryhub_client/types.py"}


def test_no_module_grows_past_600_lines() -> None:
    """Outside migrations, tests and generated code: a module past the limit is split by
    subdomain."""
    too_long = {
        str(path.relative_to(ROOT))
        for app in [*project_apps(), "memoryhub_client"]
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.parts and len(path.read_text().splitlines()) > MAX_MODULE_LINES
    } - GENERATED_MODULES

    assert too_long == set()
