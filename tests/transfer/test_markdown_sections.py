"""How `memoryhub import-markdown` cuts a file into memory records (no server needed)."""

from __future__ import annotations

from memoryhub_client.markdown import markdown_records, render_type_file


def test_each_heading_section_with_text_is_one_record_keyed_by_file_and_heading_path() -> None:
    text = "Intro line.\n\n# Guide\n\n## Setup\n\nRun make.\n\n### Linux\n\nUse apt.\n\n## Setup\n\nAgain.\n\n## Empty\n"

    records = markdown_records("AGENTS", text, project="web")

    assert [(r["key"], r["content"], r["heading"]) for r in records] == [
        ("agents", "Intro line.", ""),
        ("agents:guide:setup", "Run make.", "Guide > Setup"),
        ("agents:guide:setup:linux", "Use apt.", "Guide > Setup > Linux"),
        ("agents:guide:setup-2", "Again.", "Guide > Setup"),
    ]
    assert {r["project"] for r in records} == {"web"}
    assert all("type" not in r for r in records)  # left to the server's type inference


def test_memoryhubs_injected_section_is_never_a_record() -> None:
    text = (
        "# Notes\n\nKeep this.\n\n<!-- memoryhub:begin -->\n## MemoryHub memory\n\n"
        "- deploy-steps: injected text\n<!-- memoryhub:end -->\n\n## After\n\nAnd this.\n"
    )

    records = markdown_records("CLAUDE", text, project="")

    assert [r["content"] for r in records] == ["Keep this.", "And this."]
    assert not any("injected" in r["content"] or "memoryhub" in r["key"] for r in records)


def test_headings_inside_fenced_code_are_text() -> None:
    records = markdown_records("MEMORY", "# Run\n\n```sh\n# comment\nmake\n```\n", project="")

    assert [(r["key"], r["content"]) for r in records] == [("memory:run", "```sh\n# comment\nmake\n```")]


def test_export_markdown_file_is_sorted_by_key() -> None:
    rendered = render_type_file(
        "lesson",
        [{"key": "b", "content": "B.", "project": ""}, {"key": "a", "content": "A.", "project": "web"}],
    )

    assert rendered == (
        "# Lesson\n\n"
        '## a\n\n<!-- memoryhub:entry {"key": "a", "lines": 1, "project": "web"} -->\nA.\n'
        "<!-- memoryhub:entry-end -->\n\n"
        '## b\n\n<!-- memoryhub:entry {"key": "b", "lines": 1, "project": ""} -->\nB.\n'
        "<!-- memoryhub:entry-end -->\n"
    )


def test_closing_hashes_are_stripped_and_adversarial_headings_complete() -> None:
    closed = markdown_records("notes", "# Deploys ##\n\nOn Tuesdays.\n", project="web")
    assert [r["heading"] for r in closed] == ["Deploys"]

    # 64 KiB headings of repeated separators: each line is scanned once (a hang detector
    # only; a lazy title before `[ \t#]*$` rescanned the run from every position).
    for run in (" #" * 32_768 + "x", "\t#" * 32_768 + "x", "# " * 32_768):
        records = markdown_records("notes", f"# a{run}\n\nBody.\n", project="web")
        assert len(records) == 1 and records[0]["content"] == "Body."


def test_an_exported_markdown_file_reads_back_as_its_entries_under_their_own_keys() -> None:
    """What export-markdown writes, import-markdown reads as the same entries: each under
    its own key (not the file's name and headings joined), with its text byte for byte,
    headings, fences and the injected-section markers inside it included."""
    text = "Never deploy on a Friday.\n\n## Why\n\n```sh\n# not a heading\n```\n<!-- memoryhub:begin -->\n  "
    entries = [
        {
            "key": "deploy-friday",
            "content": text,
            "type": "lesson",
            "project": "web",
            "metadata": {"tags": ["deploy"], "note": "ends with -->"},
            "skill_trigger": None,
            "anchor": {"type": "file", "value": "docs/deploy.md"},
            "updated_by": "ann",
            "created_at": "2026-01-02T03:04:05.000006Z",
        },
        {"key": "b", "content": "B.", "type": "lesson", "project": "", "metadata": {}},
    ]

    records = markdown_records("lesson", render_type_file("lesson", entries), project="")

    assert [(r["key"], r["content"], r["type"], r["project"]) for r in records] == [
        ("b", "B.", "lesson", ""),
        ("deploy-friday", text, "lesson", "web"),
    ]
    friday = records[1]
    assert friday["metadata"] == {"tags": ["deploy"], "note": "ends with -->"}
    assert friday["anchor"] == {"type": "file", "value": "docs/deploy.md"}
    assert (friday["updated_by"], friday["created_at"]) == ("ann", "2026-01-02T03:04:05.000006Z")
