"""`memoryhub export | import | import-markdown | export-markdown` against a real server
(gunicorn on this run's test database, as the MCP tests use), with the URL, team and
token from the environment, as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memories.models import Annotation, Memory
from teams.models import Team, VaultEntry
from teams.scope import team_scope
from teams.selectors import reveal_vault_value
from teams.services import set_vault_entry
from tests.conftest import Agent, make_agent, operator_view
from tests.factories import TeamFactory
from tests.mcp.conftest import Server, mcp_server  # noqa: F401  (the server fixture)
from tests.transfer.helpers import seed_rich_team

pytestmark = pytest.mark.django_db(transaction=True)

MEMORYHUB = str(Path(sys.executable).parent / "memoryhub")
CLI_SECONDS = 120  # a hang detector


def memoryhub(
    server: Server, agent: Agent, *args: str, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMORYHUB_")},
        "MEMORYHUB_URL": server.base,
        "MEMORYHUB_TEAM": agent.team.slug,
        "MEMORYHUB_TOKEN": agent.token,
        "XDG_CONFIG_HOME": "/nonexistent",
        **(extra_env or {}),
    }
    done = subprocess.run(  # noqa: S603
        [MEMORYHUB, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=CLI_SECONDS,
        check=False,
        stdin=subprocess.DEVNULL,  # never a terminal: a passphrase is never asked for
    )
    assert agent.token not in done.stdout + done.stderr
    return done


def memories_of(team: Team) -> list[tuple[str, str, str, bool]]:
    with operator_view():
        return list(
            Memory.objects.filter(team=team)
            .order_by("key", "created_at")
            .values_list("key", "content", "type", "is_active")
        )


@pytest.fixture
def alpha_admin(team: Team) -> Agent:
    return make_agent(team, "alpha-admin", ["admin"])


@pytest.fixture
def charlie_admin(db: None) -> Agent:
    return make_agent(TeamFactory(slug="charlie", name="Charlie"), "charlie-admin", ["admin"])


def test_export_then_import_into_another_team_with_a_dry_run_first(
    mcp_server: Server,  # noqa: F811
    team: Team,
    alpha_admin: Agent,
    charlie_admin: Agent,
    tmp_path: Path,
) -> None:
    seed_rich_team(team)
    target = tmp_path / "alpha.jsonl"

    exported = memoryhub(mcp_server, alpha_admin, "export", "--output", str(target))
    assert exported.returncode == 0, exported.stderr
    records = [json.loads(line) for line in target.read_text().splitlines()]
    assert records[0]["record"] == "header" and records[-1]["record"] == "end"
    assert records[-1]["memories"] == len(memories_of(team))

    dry = memoryhub(mcp_server, charlie_admin, "import", str(target), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "dry run, nothing changed" in dry.stdout
    assert memories_of(charlie_admin.team) == []

    applied = memoryhub(mcp_server, charlie_admin, "import", str(target))
    assert applied.returncode == 0, applied.stderr
    assert memories_of(charlie_admin.team) == memories_of(team)

    again = memoryhub(mcp_server, charlie_admin, "import", str(target), "--skip-existing")
    assert again.returncode == 0
    assert "0 created, 0 superseded" in again.stdout
    assert memories_of(charlie_admin.team) == memories_of(team)


def test_export_with_the_vault_and_import_it_with_the_passphrase_from_the_environment(
    mcp_server: Server,  # noqa: F811
    team: Team,
    alpha_admin: Agent,
    charlie_admin: Agent,
    tmp_path: Path,
) -> None:
    secret = "sk-live-5c4b3a29180716f0e"
    with team_scope(team.id):
        set_vault_entry(team=team, key="stripe-key", value=secret, is_secret=True, actor="ann")
    target = tmp_path / "alpha.jsonl"
    passphrase = {"VAULT_PASSPHRASE": "a long enough passphrase"}

    unsealed = memoryhub(mcp_server, alpha_admin, "export", "--with-vault", "--output", str(target))
    assert unsealed.returncode != 0 and "passphrase" in unsealed.stderr
    exported = memoryhub(
        mcp_server, alpha_admin, "export", "--with-vault", "--passphrase-env", "VAULT_PASSPHRASE",
        "--output", str(target), extra_env=passphrase,
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    assert secret not in target.read_text()

    without = memoryhub(mcp_server, charlie_admin, "import", str(target), "--dry-run")
    assert without.returncode == 0, without.stderr
    assert "vault entries: 0 created, 0 replaced, 0 unchanged, 1 skipped" in without.stdout
    applied = memoryhub(
        mcp_server, charlie_admin, "import", str(target), "--passphrase-env", "VAULT_PASSPHRASE",
        extra_env=passphrase,
    )  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    assert "vault entries: 1 created" in applied.stdout
    with operator_view():
        entry = VaultEntry.objects.get(team=charlie_admin.team, key="stripe-key")
    assert entry.is_secret and reveal_vault_value(entry) == secret


def test_export_to_stdout_and_refusals_are_one_line_without_the_token(
    mcp_server: Server,  # noqa: F811
    team: Team,
    alpha_admin: Agent,
    member: Agent,
) -> None:
    seed_rich_team(team)

    to_stdout = memoryhub(mcp_server, alpha_admin, "export")
    refused = memoryhub(mcp_server, member, "export")

    assert to_stdout.returncode == 0
    assert json.loads(to_stdout.stdout.splitlines()[-1])["record"] == "end"
    assert refused.returncode == 1
    assert "403 forbidden" in refused.stderr and "admin" in refused.stderr


def test_strict_import_of_a_file_with_bad_lines_applies_nothing(
    mcp_server: Server,  # noqa: F811
    team: Team,
    alpha_admin: Agent,
    tmp_path: Path,
) -> None:
    header = {"record": "header", "format": "memoryhub-export", "version": 1}
    good = {"record": "memory", "key": "good-one", "content": "A good fact.", "type": "lesson"}
    source = tmp_path / "bad.jsonl"
    source.write_text(f"{json.dumps(header)}\n{json.dumps(good)}\n{{oops\n")

    strict = memoryhub(mcp_server, alpha_admin, "import", str(source), "--strict")
    assert strict.returncode == 1
    assert "line 3: malformed_json" in strict.stderr
    assert memories_of(team) == []

    lenient = memoryhub(mcp_server, alpha_admin, "import", str(source))
    assert lenient.returncode == 1  # applied, but a line was skipped: the exit status says so
    assert "line 3: malformed_json" in lenient.stderr and "(skipped)" in lenient.stderr
    assert memories_of(team) == [("good-one", "A good fact.", "lesson", True)]


CLAUDE_MD = """\
# Project notes

We build the billing service.

## Decisions

We decided to use PostgreSQL for everything.

## Testing

Never run the payment tests in parallel.

```sh
# not a heading: inside a code block
make test
```

<!-- memoryhub:begin -->
## MemoryHub memory

- injected-entry: this came from MemoryHub and must not come back
<!-- memoryhub:end -->
"""


def test_import_markdown_makes_one_memory_per_section_and_skips_the_injected_one(
    mcp_server: Server,  # noqa: F811
    team: Team,
    alpha_admin: Agent,
    tmp_path: Path,
) -> None:
    (tmp_path / "CLAUDE.md").write_text(CLAUDE_MD)
    notes = tmp_path / "memory"
    notes.mkdir()
    (notes / "global.md").write_text("Our team is the payments squad.\n")
    (notes / "2024-05-01.md").write_text("# Outage\n\nBack in 2023 the queue overflowed.\n")

    done = memoryhub(
        mcp_server,
        alpha_admin,
        "import-markdown",
        str(tmp_path / "CLAUDE.md"),
        str(notes),
        "--project",
        "billing",
    )

    assert done.returncode == 0, done.stderr
    stored = {key: (content, kind) for key, content, kind, active in memories_of(team) if active}
    assert stored == {
        "claude:project-notes": ("We build the billing service.", "context"),
        "claude:project-notes:decisions": ("We decided to use PostgreSQL for everything.", "decision"),
        "claude:project-notes:testing": (
            "Never run the payment tests in parallel.\n\n```sh\n# not a heading: inside a code block\nmake test\n```",
            "lesson",
        ),
        "global": ("Our team is the payments squad.", "identity"),
        "2024-05-01:outage": ("Back in 2023 the queue overflowed.", "historical"),
    }
    with operator_view():
        assert set(Memory.objects.filter(team=team).values_list("project", flat=True)) == {"billing"}
        assert not Memory.objects.filter(team=team, content__contains="injected-entry").exists()

    again = memoryhub(
        mcp_server,
        alpha_admin,
        "import-markdown",
        str(tmp_path / "CLAUDE.md"),
        str(notes),
        "--project",
        "billing",
    )
    assert "0 created" in again.stdout and "5 unchanged" in again.stdout, again.stdout + again.stderr


def test_export_markdown_writes_one_file_per_type_in_a_stable_order(
    mcp_server: Server,  # noqa: F811
    team: Team,
    member: Agent,
    tmp_path: Path,
) -> None:
    seed_rich_team(team)

    first = memoryhub(mcp_server, member, "export-markdown", str(tmp_path / "one"))
    second = memoryhub(mcp_server, member, "export-markdown", str(tmp_path / "two"))

    assert first.returncode == second.returncode == 0, first.stderr
    files = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert files == ["context.md", "decision.md", "lesson.md"]
    for name in files:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    context = (tmp_path / "one" / "context.md").read_text()
    assert context.index("## deploy-steps") < context.index("## reborn") < context.index("## release-skill")
    assert "Deploy with the release pipeline, never by hand." in context
    assert "Try a monorepo." not in context  # deleted: not an active memory


def test_a_file_bigger_than_a_batch_is_sent_in_batches_with_each_key_whole(
    mcp_server: Server,  # noqa: F811
    team: Team,
    alpha_admin: Agent,
    charlie_admin: Agent,
    tmp_path: Path,
) -> None:
    seed_rich_team(team)
    target = tmp_path / "alpha.jsonl"
    assert memoryhub(mcp_server, alpha_admin, "export", "--output", str(target)).returncode == 0
    lines = target.read_text().splitlines()
    # A bad line in the middle: reported with its number in the file, not in its batch.
    lines.insert(5, "{oops")
    target.write_text("\n".join(lines) + "\n")

    strict = memoryhub(mcp_server, charlie_admin, "import", str(target), "--strict", "--batch-bytes", "700")
    assert strict.returncode == 1
    assert "line 6: malformed_json" in strict.stderr
    assert memories_of(charlie_admin.team) == []

    applied = memoryhub(mcp_server, charlie_admin, "import", str(target), "--batch-bytes", "700")
    assert applied.returncode == 1, applied.stderr  # one line skipped
    assert "line 6: malformed_json" in applied.stderr
    assert memories_of(charlie_admin.team) == memories_of(team)
    with operator_view():
        notes = sorted(Annotation.objects.filter(team=charlie_admin.team).values_list("note", flat=True))
        original = sorted(Annotation.objects.filter(team=team).values_list("note", flat=True))
    assert notes == original
