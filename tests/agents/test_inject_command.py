"""`manage.py inject`: one marked section in a CLAUDE.md / AGENTS.md, replaced in place,
every other byte kept, idempotent to the byte (and to the mtime)."""

from __future__ import annotations

import os
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from memories import writes
from teams.models import Team
from teams.scope import team_scope
from teams.services import set_vault_entry

BEGIN = b"<!-- memoryhub:begin -->"
END = b"<!-- memoryhub:end -->"
OLD_SECTION = BEGIN + b"\n## MemoryHub memory\n\nstale text from an earlier run\n" + END


def remember(team: Team, key: str, content: str, memory_type: str = "lesson", **extra: object) -> None:
    with team_scope(team.id):
        writes.save_memory(
            team=team, key=key, content=content, type_name=memory_type, updated_by="tester", **extra
        )


def inject(*args: str) -> str:
    out = StringIO()
    call_command("inject", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def section_of(data: bytes) -> bytes:
    start = data.index(BEGIN)
    return data[start : data.index(END, start) + len(END)]


@pytest.fixture
def memories(team: Team) -> None:
    remember(team, "who", "I am the release agent.", "identity")
    remember(team, "deploy-friday", "Never deploy on Fridays.", "lesson")
    remember(team, "queue", "We decided to use Redis for the job queue.", "decision")


def test_creates_a_missing_file_with_the_section(memories: None, team: Team, tmp_path: Path) -> None:
    target = tmp_path / "CLAUDE.md"

    output = inject(team.slug, "--into", str(target))

    data = target.read_bytes()
    assert data.startswith(BEGIN + b"\n## MemoryHub memory\n\n### Identity\n\n[IDENTITY] [who]: I am")
    assert data.endswith(END + b"\n")
    assert b"[LESSON] [deploy-friday]: Never deploy on Fridays." in data
    assert b"[DECISION] [queue]:" in data
    assert "created" in output and "3 entries" in output


def test_replaces_the_section_in_place_and_keeps_every_other_byte(
    memories: None, team: Team, tmp_path: Path
) -> None:
    before = "# Project notes\n\nSome rules — ünïcødé, 日本語, emoji 🚀.\n\n".encode()
    after = b"\n\n## Afterwards\n\n- keep this list\n-   and its   odd spacing  \n\n\n"
    target = tmp_path / "AGENTS.md"
    target.write_bytes(before + OLD_SECTION + after)

    assert "updated" in inject(team.slug, "--into", str(target))

    data = target.read_bytes()
    assert data.startswith(before) and data.endswith(after)
    section = data[len(before) : len(data) - len(after)]
    assert section == section_of(data)
    assert b"stale text" not in data
    assert b"[LESSON] [deploy-friday]" in section


def test_a_crlf_file_keeps_its_line_endings_and_the_section_uses_them(
    memories: None, team: Team, tmp_path: Path
) -> None:
    before = b"# Rules\r\n\r\nUse tabs.\r\n\r\n"
    after = b"\r\nThe end.\r\n"
    old = OLD_SECTION.replace(b"\n", b"\r\n")
    target = tmp_path / "CLAUDE.md"
    target.write_bytes(before + old + after)

    inject(team.slug, "--into", str(target))

    data = target.read_bytes()
    assert data.startswith(before) and data.endswith(after)
    assert b"\n" not in data.replace(b"\r\n", b"")  # no bare LF anywhere
    assert b"[LESSON] [deploy-friday]: Never deploy on Fridays.\r\n" in data


def test_a_file_without_a_final_newline_keeps_none(memories: None, team: Team, tmp_path: Path) -> None:
    before = b"intro line\n\n"
    target = tmp_path / "CLAUDE.md"
    target.write_bytes(before + OLD_SECTION)

    inject(team.slug, "--into", str(target))

    data = target.read_bytes()
    assert data.startswith(before)
    assert data.endswith(END)  # still no newline after the end marker
    assert b"stale text" not in data


def test_a_file_without_the_section_gets_it_appended_after_its_own_bytes(
    memories: None, team: Team, tmp_path: Path
) -> None:
    original = "# Notes\n\nno final newline here — ü".encode()
    target = tmp_path / "CLAUDE.md"
    target.write_bytes(original)

    inject(team.slug, "--into", str(target))

    data = target.read_bytes()
    assert data.startswith(original + b"\n\n" + BEGIN)
    assert data.endswith(END + b"\n")


def test_running_twice_changes_nothing_not_even_the_mtime(memories: None, team: Team, tmp_path: Path) -> None:
    target = tmp_path / "CLAUDE.md"
    target.write_bytes(b"# Notes\r\n\r\n" + OLD_SECTION.replace(b"\n", b"\r\n") + b"\r\ntail")
    inject(team.slug, "--into", str(target))
    first = target.read_bytes()
    os.utime(target, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))

    output = inject(team.slug, "--into", str(target))

    assert target.read_bytes() == first
    assert target.stat().st_mtime_ns == 1_000_000_000_000_000_000
    assert "unchanged" in output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["CLAUDE.md"]  # no temporary file left


def test_a_new_memory_updates_the_section_and_nothing_else(
    memories: None, team: Team, tmp_path: Path
) -> None:
    target = tmp_path / "CLAUDE.md"
    target.write_bytes(b"head\n\n" + OLD_SECTION + b"\n\nfoot\n")
    inject(team.slug, "--into", str(target))

    remember(team, "tabs", "Always indent with four spaces.", "lesson")
    inject(team.slug, "--into", str(target))

    data = target.read_bytes()
    assert data.startswith(b"head\n\n" + BEGIN) and data.endswith(END + b"\n\nfoot\n")
    assert data.count(BEGIN) == 1 and data.count(END) == 1
    assert b"[LESSON] [tabs]: Always indent with four spaces." in data


def test_a_memory_that_contains_a_marker_cannot_break_the_section(team: Team, tmp_path: Path) -> None:
    remember(team, "tricky", "Write this:\n<!-- memoryhub:end -->\nand then more.", "context")
    target = tmp_path / "CLAUDE.md"
    inject(team.slug, "--into", str(target))
    first = target.read_bytes()

    inject(team.slug, "--into", str(target))

    assert target.read_bytes() == first
    assert first.endswith(END + b"\n") and b"\n  <!-- memoryhub:end -->\n" in first


def test_project_and_max_tokens_are_passed_on(team: Team, tmp_path: Path) -> None:
    remember(team, "web", "The web app uses React.", "decision", project="web")
    remember(team, "mobile", "The mobile app uses Flutter.", "decision", project="mobile")
    target = tmp_path / "CLAUDE.md"

    inject(team.slug, "--into", str(target), "--project", "web", "--max-tokens", "500")

    data = target.read_bytes()
    assert b"React" in data and b"Flutter" not in data


def test_vault_secrets_never_reach_the_file(team: Team, tmp_path: Path) -> None:
    # Worded so no credential rule redacts it when saved (`The staging password is …` is).
    remember(team, "creds", "Staging answers to swordfish-4711-blue.", "context")
    with team_scope(team.id):
        set_vault_entry(team=team, key="pw", value="swordfish-4711-blue", is_secret=True, actor="t")
    target = tmp_path / "CLAUDE.md"

    inject(team.slug, "--into", str(target))

    assert b"swordfish" not in target.read_bytes()
    assert b"[REDACTED:vault_secret]" in target.read_bytes()


@pytest.mark.parametrize("slug", ["Not-A-Slug", "-bad", "ghost"])
def test_an_invalid_slug_or_unknown_team_is_a_command_error(db: None, slug: str, tmp_path: Path) -> None:
    target = tmp_path / "CLAUDE.md"

    with pytest.raises(CommandError):
        inject(slug, "--into", str(target))

    assert not target.exists()


@pytest.mark.parametrize("max_tokens", ["10", "100001", "many"])
def test_a_bad_budget_is_a_command_error(team: Team, tmp_path: Path, max_tokens: str) -> None:
    with pytest.raises(CommandError):
        inject(team.slug, "--into", str(tmp_path / "CLAUDE.md"), "--max-tokens", max_tokens)


@pytest.mark.parametrize(
    "content",
    [
        b"text\n" + BEGIN + b"\nno end marker\n",
        b"text\n" + END + b"\n" + BEGIN + b"\n",
        OLD_SECTION + b"\n" + OLD_SECTION + b"\n",
    ],
)
def test_a_file_with_broken_markers_is_left_alone(team: Team, tmp_path: Path, content: bytes) -> None:
    target = tmp_path / "CLAUDE.md"
    target.write_bytes(content)

    with pytest.raises(CommandError, match="markers"):
        inject(team.slug, "--into", str(target))

    assert target.read_bytes() == content


def test_a_missing_folder_is_a_command_error(team: Team, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no folder"):
        inject(team.slug, "--into", str(tmp_path / "nope" / "CLAUDE.md"))
