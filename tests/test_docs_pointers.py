"""Every pointer into the docs resolves: a `docs/<page>.md, "Heading"` in code, settings,
templates or the docs names a page that exists and a heading it has, and every relative
link of README.md and docs/ reaches a file (and its anchor). The docs are one page per
subsystem; a pointer to a page or heading that is gone sends a reader nowhere.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIPPED_DIRS = {".git", ".venv", ".memoryhub", "node_modules", "bench-results", "__pycache__", "vendor"}
SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".sql", ".html", ".txt", ".js", ".cfg", ".ini"}
NAMES = {"Makefile", "Procfile", "Dockerfile", ".env.example"}

# A page, then one or more quoted headings: `docs/search.md, "Scoring"`,
# `docs/operations.md ("Drills")`, `docs/security.md, "Rate limits", "Web hardening"`.
POINTER = re.compile(r'(docs/[\w-]+\.md)`?(?:,\s*|\s*\(\s*)((?:"[^"\n]+"(?:,\s*|\s+and\s+)?)+)')
PAGE = re.compile(r"docs/[\w-]+\.md")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# Line breaks inside a pointer, with the comment marker of the next line.
LINE_BREAK = re.compile(r"[ \t]*\n[ \t]*(?:#|--|\*)?[ \t]*")
# The seam of two Python string literals written one after the other ("...md, " '"Heading"').
LITERAL_SEAM = re.compile(r"[\"'] ['\"]")


def repository_files() -> list[Path]:
    found = []
    for path in ROOT.rglob("*"):
        if any(part in SKIPPED_DIRS for part in path.relative_to(ROOT).parts):
            continue
        if path == Path(__file__).resolve():
            continue  # its own examples are broken on purpose
        if path.is_file() and (path.suffix in SUFFIXES or path.name in NAMES):
            found.append(path)
    return found


def headings(page: Path) -> set[str]:
    return {" ".join(m.group(1).split()) for m in re.finditer(r"(?m)^#{1,6}\s+(.+)$", page.read_text())}


def anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def broken_pointers(path: Path) -> list[str]:
    text = LINE_BREAK.sub(" ", path.read_text(errors="replace"))
    if path.suffix == ".py":
        text = LITERAL_SEAM.sub("", text)
    where = path.relative_to(ROOT)
    # Every page named must exist; tests' data names made-up pages (docs/runbook.md), so
    # there only a page pointed into with a heading must.
    named = PAGE.finditer(text) if where.parts[0] != "tests" else POINTER.finditer(text)
    problems = [
        f"{where}: {page} does not exist"
        for page in dict.fromkeys(match.group(0 if match.re is PAGE else 1) for match in named)
        if not (ROOT / page).is_file()
    ]
    for match in POINTER.finditer(text):
        page = ROOT / match.group(1)
        if not page.is_file():
            continue
        known = headings(page)
        for heading in re.findall(r'"([^"]+)"', match.group(2)):
            if " ".join(heading.split()) not in known:
                problems.append(f'{where}: {match.group(1)} has no heading "{heading}"')
    return problems


def broken_links(path: Path) -> list[str]:
    problems = []
    for match in LINK.finditer(path.read_text()):
        target = match.group(1)
        if re.match(r"[a-z]+:", target):
            continue
        file_part, _, fragment = target.partition("#")
        linked = (path.parent / file_part) if file_part else path
        if not linked.exists():
            problems.append(f"{path.relative_to(ROOT)}: link to missing {target}")
        elif fragment and linked.suffix == ".md" and fragment not in {anchor(h) for h in headings(linked)}:
            problems.append(f"{path.relative_to(ROOT)}: link to missing anchor {target}")
    return problems


def test_every_docs_pointer_names_a_page_and_a_heading_it_has():
    problems = [problem for path in repository_files() for problem in broken_pointers(path)]
    assert problems == []


def test_every_relative_link_of_the_docs_resolves():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    problems = [problem for page in pages for problem in broken_links(page)]
    assert problems == []


def test_the_checks_catch_a_missing_heading_a_missing_page_and_a_broken_link(tmp_path, monkeypatch):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "search.md").write_text("# Search\n\n## Scoring\n\nSee [tenancy](tenancy.md#quotas).\n")
    (docs / "tenancy.md").write_text("# Tenancy\n\n## Quotas\n")
    code = tmp_path / "module.py"
    code.write_text(
        '# Fine (docs/search.md, "Scoring"), split over lines (docs/tenancy.md,\n'
        '# "Quotas"); gone (docs/search.md, "Ranking"); no page (docs/decisions.md, "Beat").\n'
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert broken_pointers(code) == [
        "module.py: docs/decisions.md does not exist",
        'module.py: docs/search.md has no heading "Ranking"',
    ]
    assert broken_links(docs / "search.md") == []
    (docs / "search.md").write_text("[gone](tenancy.md#scoring) [missing](decisions.md)\n")
    assert broken_links(docs / "search.md") == [
        "docs/search.md: link to missing anchor tenancy.md#scoring",
        "docs/search.md: link to missing decisions.md",
    ]
