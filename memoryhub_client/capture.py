"""The capture rules: which tool failures and user prompts of a coding agent's session are
learnings worth a person's review (docs/agents.md, "Capture"); the prompts' rules are in
memoryhub_client.capture_corrections, the whole transcript's in capture_transcripts.
Pure functions, no I/O: the
hooks (memoryhub_client.capture_hooks, and Cursor's and Windsurf's in cursor_hooks) feed
them one event at a time, or a whole transcript before Claude Code compacts it, and send
what they find as drafts. A result reported as a success that shows a failure (Claude
Code's PostToolUse, Cursor's postToolUse) is found by result_failure and then read by the
same failure rules. Cursor's tool names: `Shell` is the shell (`Bash` below), `Delete`
the agent's own bookkeeping.

Rules (RULES_VERSION says which ones a figure was measured with; docs/agents.md,
"Capture figures"). Version 1 was frozen before the bench's first set was written;
version 2 changed what that set showed wrong (marked "v2" below) and was frozen before
its second set was written; version 3 changed what both sets showed wrong (marked "v3")
and was frozen before the third set was written; version 4 changed what the three sets
showed wrong, aiming at per-event precision (marked "v4"), and was frozen before the
fourth set was written; version 5 changed what the four sets showed wrong, as general
principles rather than the sets' wordings (marked "v5": a name the command itself gave,
any linter, a held lock, the team's practice stated with no rule word, an answer to the
agent's question), and was frozen before the fifth set, the held-out one, was written:

A tool failure is a learning unless
- the user interrupted or declined it (`is_interrupt`, "user doesn't want to proceed"...);
- it is transient: a timeout, a reset connection, a rate limit, "try again", a lock
  held by someone else ("database is locked", v2), a hung-up socket or a gateway error
  (v3), a name that did not resolve ("no such host", "could not resolve host"), a remote
  that hung up, an unexpected EOF, a 502/503/504 (v4); a lock being acquired or held by
  someone else (Terraform's state lock), a socket error, a device or command that did not
  answer ("unresponsive", "not responding"), an unreachable network (v5);
- the tool only looks things up (Read, Glob, Grep, LS, WebFetch, WebSearch...): a probe
  that found nothing;
- it is the agent's own bookkeeping (Edit, MultiEdit, Write, NotebookEdit: "string not
  found", "file not read yet"; BashOutput, KillShell, ExitPlanMode: v4);
- a shell command is a probe whose failure means "no" (grep, rg, find, ls, test, which,
  diff...) or only reads a file (cat, head, tail, less, wc, cd: v2, the shell's Read),
  or asks whether a package or ref is there (`pip show`, `npm ls`, `git rev-parse`...: v3;
  `git ls-remote`: v4), or the error holds nothing but an exit status;
- a shell command's subcommand only reads (`kubectl get`, `gh pr view`, `helm status`,
  `git show`...) and the error says the thing asked for is not there (v4; options such
  as `-chdir=stacks/data` set aside before the subcommand is read, v5);
- the error says a path the command itself names is not there ("can't open file
  'scripts/improt.py'", "file or directory not found: tests/test_x.py"): a typo or a
  guess; a path the command does not name (a tool, a file a script reads) stays a
  learning (v4);
- a package manager's script or a build tool's task is not there (npm's "Missing script",
  pnpm's ERR_PNPM_NO_SCRIPT, yarn's `Command "x" not found`, Gradle's "Task 'x' not
  found", rake's "Don't know how to build task"): the agent guessed a name (v4);
- the agent guessed a name (v5): the tool offers a near one ("Did you mean `ingester`?"),
  or the error says a thing it quotes is not there ("Cannot find project 'billing'", "no
  bin target named `ingest`") and the command itself gave that name; a name the command
  did not give (a profile, a connection the config refers to) stays a learning, and so do
  a missing command or plugin and any error with an environment cue;
- a test run fails on its assertions only (pytest, jest, `go test`, `cargo test`...,
  an AssertionError or "N failed" with no import, missing-module or environment error):
  the verdict on code the agent is writing, not knowledge of the project (v3; v4 knows
  `mix test`, `./gradlew test`, `rails test`, `swift test`, `ctest`..., rspec's
  "Failure/Error:" and "N examples, N failures", JUnit's AssertionFailedError, an
  "expected/got" pair on two lines, "assertion ... failed", TAP's "not ok");
- a compiler, type checker or linter (`go build`, `go vet`, `tsc`, `cargo build/check`,
  mypy, pyright, eslint, `ruff check`, `npm run build/lint/typecheck`...) reports
  diagnostics on the code (`file:line: ...`, `error[E0308]`, `error TS2339`) with no
  environment cue (a missing module or package, a version requirement, credentials...):
  the agent's own slip, fixed by its next edit (v4; since v5 any linter, a program named
  "*lint" such as actionlint, tflint, hadolint, ktlint, and shellcheck, `terraform
  validate`, `prettier/black/biome ... check`, with hadolint's and shellcheck's
  `file:line CODE` diagnostics);
- in a transcript, the very next call is the same call and it succeeds: a flake; or
  the same call succeeds later with only the agent's edits in between: it fixed its own
  code (v3), unless the error states a constraint of the environment ("cannot run inside
  a transaction block", "not supported", "not allowed": the edit applied the lesson, v5;
  memoryhub_client.capture_transcripts).
The learning reads "`command` failed: the error's first lines", and, in a transcript,
"then `other command` worked" when one of the next calls runs the same program
differently and succeeds.

A user prompt's rules (corrections) are in memoryhub_client.capture_corrections (v5 split
them out, unchanged in kind); RULES_VERSION numbers both.


Nothing is scrubbed here: the server scrubs credentials, the team's secrets and PII
before any text becomes a draft (freshness.draft_extraction.transcript), the one place
that knows the team's secrets. Every pattern runs on a bounded text (MAX_SCAN_CHARS) and
has no nested repetition.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

RULES_VERSION = 5
ERROR = "error"
CORRECTION = "correction"
MAX_SCAN_CHARS = 4000
MAX_COMMAND_CHARS = 160
MAX_ERROR_LINES = 3
MAX_ERROR_LINE_CHARS = 160
FIX_LOOKAHEAD_CALLS = 5

LOOKUP_TOOLS = frozenset({"Read", "Glob", "Grep", "LS", "WebFetch", "WebSearch", "TodoRead", "TodoWrite"})
# Cursor's `Delete` is its agent's own file bookkeeping, as Edit and Write are.
# Claude Code's background-shell tools (BashOutput, KillShell) and ExitPlanMode too (v4).
BOOKKEEPING_TOOLS = frozenset(
    {"Edit", "MultiEdit", "Write", "NotebookEdit", "Delete", "BashOutput", "KillShell", "KillBash",
     "ExitPlanMode"}
)  # fmt: skip
# The shell tool: Claude Code's and Codex's `Bash`, Cursor's `Shell`.
SHELL_TOOLS = frozenset({"Bash", "Shell"})
# Exit-status fields a tool's result may carry (Cursor's Shell result: `exitCode`).
EXIT_CODE_FIELDS = ("exitCode", "exit_code", "returncode", "returnCode")
PROBE_PROGRAMS = frozenset(
    {"grep", "egrep", "rg", "ag", "find", "ls", "test", "[", "which", "command", "type", "diff", "cmp",
     "pgrep", "stat", "file", "git-grep", "cat", "head", "tail", "less", "more", "wc", "cd"}
)  # fmt: skip
# (program, subcommand) pairs that ask whether something is there: a "no" is no lesson.
PROBE_SUBCOMMANDS = frozenset(
    {("pip", "show"), ("pip3", "show"), ("pip", "list"), ("npm", "ls"), ("npm", "list"), ("npm", "view"),
     ("pnpm", "list"), ("pnpm", "ls"), ("yarn", "list"), ("yarn", "why"), ("brew", "list"), ("dpkg", "-s"),
     ("git", "rev-parse"), ("git", "show-ref"), ("git", "ls-files"), ("git", "cat-file"),
     ("docker", "inspect"), ("gem", "list"), ("cargo", "tree"), ("go", "list"), ("conda", "list"),
     ("git", "ls-remote")}
)  # fmt: skip
# Subcommands that only read (`kubectl get`, `gh pr view`, `helm status`, `git show`...): their
# failure is a probe when the error says the thing asked for is not there (v4).
READ_SUBCOMMANDS = frozenset(
    {"get", "describe", "show", "view", "list", "ls", "status", "inspect", "info", "search", "log", "cat",
     "exists", "history", "top"}
)  # fmt: skip

_DECLINED = re.compile(
    r"(?i)user doesn't want|user does not want|user (?:rejected|denied|declined)|interrupted by (?:the )?user"
    r"|\[request interrupted|permission (?:to use \S+ )?(?:was )?denied by"
)
_TRANSIENT = re.compile(
    r"(?i)\btimed? ?out\b|\btimeout\b|etimedout|econnreset|connection reset|temporarily unavailable"
    r"|\b429\b|too many requests|rate.?limit|try again|\b503 service unavailable"
    r"|database is locked|resource busy|could not obtain lock|lock wait timeout"
    r"|socket hang up|\b50[24] (?:bad gateway|gateway time)|eai_again|temporary failure in name resolution"
    r"|no such host|could not resolve host|\benotfound\b|getaddrinfo|remote end hung up unexpectedly"
    r"|\bunexpected eof\b|econnaborted|connection (?:aborted|closed by (?:remote|peer))|bad gateway"
    r"|service unavailable|\bstatus(?: code)?:? 50[234]\b"
)
# v5: a lock someone else holds, a socket or device that did not answer: retried, it passes.
_TRANSIENT_V5 = re.compile(
    r"(?i)\b(?:acquir(?:e|ing)|obtain(?:ing)?|waiting for) (?:the |a )?(?:[\w-]{1,20} )?lock\b"
    r"|\block (?:is )?(?:already )?held by\b|\bsocket error\b|unresponsive|\bnot responding\b"
    r"|\bnetwork is unreachable\b|\bdevice (?:offline|not found)\b"
)
_TEST_RUN = re.compile(
    r"(?i)(?:^|[\s;&|(/])(?:pytest|py\.test|jest|vitest|mocha|rspec|phpunit|tox|nox|ctest|bats)\b"
    r"|\b(?:go|cargo|deno|dotnet|mvn|gradle|gradlew|bun|mix|rails|rake|swift|flutter|dart|zig)\s+test\b"
    r"|\b(?:npm|pnpm|yarn|npx|make|gradlew|gradle|xcodebuild)\b[^;&|]{0,60}\btest\b"
)
_ASSERTION_FAILURE = re.compile(
    r"(?i)assertionerror|\bassert(?:ion)? failed|^e\s+assert\b"
    r"|\bexpected\b[^\n]{0,80}\b(?:received|but|got|to)\b"
    r"|--- fail:|test result: failed|\b\d+ failed\b|tests?:\s+\d+ failed|\bfailed tests?/|^failed \S+::"
    r"|failure/error:|\b\d+ (?:examples?|tests?|runs?), [1-9]\d* failures?\b|assertionfailederror"
    r"|\bassertion [^\n]{0,60} failed|^(?:expected|got|but was|actual|received):?\s"
    r"|tests run: \d+, failures: [1-9]"
    r"|^not ok \d+|^fail:\s"
)
_ENVIRONMENT_FAILURE = re.compile(
    r"(?i)modulenotfounderror|importerror|no module named|cannot find module|command not found|not installed"
    r"|unresolved import|undeclared crate"
    r"|no such file|connection refused|could not connect|permission denied|operationalerror"
    r"|error collecting|errors? during collection|fixture '[^']{1,80}' not found|linker|unsupported engine"
    r"|environment variable|not set\b|syntaxerror|cannot find package|missing go\.sum"
    r"|no required module provides|requires? (?:python|node|go|java|ruby|rust|php|gradle|npm|pnpm)\b"
    r"|unsupported (?:engine|version|platform|python|node)|toolchain|could not resolve (?:dependencies|all)"
    r"|unable to (?:locate|find) (?:credentials|package)|\bunauthori[sz]ed\b|\bforbidden\b|access denied"
)
# A compiler, type checker or linter run: its diagnostics on the code are the verdict on
# code being written, as a red test is (v4), unless the environment shows through.
_CHECK_RUN = re.compile(
    r"(?i)(?:^|[\s;&|(/])(?:tsc|mypy|pyright|eslint|rubocop|javac|kotlinc|golangci-lint|clippy-driver|flake8)\b"
    r"|\bgo\s+(?:build|vet)\b|\bcargo\s+(?:build|check|clippy)\b|\bruff\s+check\b|\bswift\s+build\b"
    r"|\bdotnet\s+build\b|\b(?:npm|pnpm|yarn|bun)\b(?: run)? (?:build|typecheck|type-check|lint|check)\b"
    r"|\bvue-tsc\b|\bmake\s+(?:build|lint|check|typecheck)\b"
)
# v5: any linter (`actionlint`, `tflint`, `hadolint`, `ktlint`...: a program named "*lint")
# and the validators that check files the agent writes.
_LINT_RUN = re.compile(
    r"(?i)(?:^|[\s;&|(/])[\w-]{0,30}lint\b|\bshellcheck\b|\b(?:terraform|tofu|packer)\s+validate\b"
    r"|\bkubeconform\b|\bcheck-jsonschema\b|\b(?:prettier|black|biome)\b[^;&|]{0,40}\bcheck\b"
)
_CODE_DIAGNOSTIC = re.compile(
    r"(?i)^[\w./-]{1,200}\.\w{1,10}[:(]\d+(?:[:,]\d+)?\)?:?\s|^error\[e\d{3,5}\]|\berror ts\d{3,5}\b"
    r"|^-->\s\S|^\d+:\d+\s+error\s"
    r"|^[\w./-]{1,200}:\d+(?::\d+)? [a-z]{2,4}\d{3,5}\b"  # v5: `Dockerfile:3 DL3008` (hadolint, shellcheck)
)
# A package manager's script, a build tool's task or recipe that is not there: the agent
# guessed a name (v4).
_UNKNOWN_SCRIPT = re.compile(
    r"(?i)missing script:|err_pnpm_no_script|\bcommand \"[^\"]{1,80}\" not found"
    r"|task '[^']{1,80}' not found in"
    r"|don't know how to build task|justfile does not contain recipe"
)
# v5: the tool offers a near name: the agent guessed one ("Did you mean `ingester`?").
_NEAR_NAME = re.compile(
    r"(?i)\bdid you mean\b|\bperhaps you meant\b|\bsimilar (?:names?|\w+s) (?:exist|are)\b"
)
# v5: the error says a thing it quotes is not there ("Cannot find project 'billing'", "no bin
# target named `ingest`"): a guess when the command itself named it.
_QUOTED_NAME = re.compile(r"['\"`\u2018\u201c]([^'\"`\u2019\u201d\s]{1,80})['\"`\u2019\u201d]")
_NAME_NOT_THERE = re.compile(
    r"(?i)not found|cannot find|can't find|could not find|no such|does not exist|doesn't exist"
    r"|\bunknown\b|\bno [\w-]{1,20}(?: [\w-]{1,20})? named\b|\bnot (?:a )?(?:known|valid)\b"
)
_MISSING_COMMAND = re.compile(r"(?i)\b(?:sub)?command\b|\bplugin\b|\bexecutable\b")
# A file or folder the command named and that is not there: a probe or a slip (v4).
_MISSING_FILE = re.compile(
    r"(?i)no such file\b|cannot access|cannot open|can't open|does not exist|doesn't exist"
    r"|file or directory not found|could not open|not found"
)
# Between a path and "No such file": quotes, a colon, `[Errno 2]`, a word or two ("directory").
_ONLY_PUNCTUATION = re.compile(r"(?i)^['\":\s,)\]]{0,6}(?:\[errno \d+\]\s?)?(?:[a-z]+\s){0,2}$")
_NOT_THERE = re.compile(
    r"(?i)not found|no such|does not exist|doesn't exist|unknown revision|notfound|\bno [\w ]{1,40} found"
    r"|no matches"
    r"|could not find|cannot find|did not find|could not be found"
)
_EXIT_STATUS = re.compile(
    r"(?i)^(?:error: )?(?:exit code \d+|command (?:failed|exited) with (?:non-zero )?(?:status|exit)"
    r"(?: code)? ?\d*|process exited with code \d+)\.?$"
)

# A line of a shell's stderr that reports an error (not a warning or progress).
_STDERR_ERROR = re.compile(
    r"(?im)^[ \t]*(?:error\b|fatal\b|traceback \(most recent call last\)|[\w.]{0,80}(?:error|exception):"
    r"|npm err!|panic:|e: )"
)


@dataclass(frozen=True)
class Learning:
    """What the hooks send as a draft: `text` is the draft's content."""

    kind: str  # ERROR or CORRECTION
    text: str
    source: str  # the tool call's id, or "prompt:<n>" for the n-th prompt of a transcript
    fingerprint: str  # one failure or correction, however often it is seen

    def as_draft_text(self) -> str:
        # `Learning:` is a label the server's draft rules read as a lesson, whole.
        return f"Learning: {self.text}"


# ---------------------------------------------------------------------- tool failures


def failure_learning(
    tool_name: Any, tool_input: Any, error: Any, *, is_interrupt: Any = False, source: str = ""
) -> Learning | None:
    """The learning of one failed tool call (Claude Code's PostToolUseFailure, a failed
    result of its PostToolUse, Cursor's postToolUseFailure), or None."""
    name = str(tool_name or "")
    text = error_text(error)
    if is_interrupt is True or _DECLINED.search(text):
        return None
    if name in LOOKUP_TOOLS or name in BOOKKEEPING_TOOLS or _is_transient(text):
        return None
    lines = _error_lines(text)
    if not lines:
        return None
    command = command_of(name, tool_input)
    if name in SHELL_TOOLS and (
        program_of(command) in PROBE_PROGRAMS or _program_and_subcommand(command) in PROBE_SUBCOMMANDS
    ):
        return None
    if name in SHELL_TOOLS and (
        _is_red_test(command, text)
        or _is_code_verdict(command, text)
        or _UNKNOWN_SCRIPT.search(text)
        or _is_read_probe(command, text)
        or _names_a_missing_file(command, lines)
        or _guessed_a_name(command, text)
    ):
        return None
    shown = shorten(command, MAX_COMMAND_CHARS) if command else name
    body = f"`{shown}` failed: " + " / ".join(lines)
    fingerprint = fingerprint_of(ERROR, name, normalise(command), normalise(lines[0]))
    return Learning(ERROR, body, source, fingerprint)


def result_failure(tool_name: Any, result: Any) -> tuple[str, bool] | None:
    """The error a tool call's result shows although it was reported as a success (Claude
    Code's PostToolUse `tool_response`, Cursor's postToolUse `tool_output` parsed), and
    whether the user interrupted it; None when the result shows no failure. Failure:
    `is_error`, `interrupted`, a non-zero exit status, an `error` text, or, for the shell,
    a stderr line that reports an error. The error is then read by failure_learning, the
    one rule set."""
    if not isinstance(result, dict):
        return None
    stderr, stdout = _text_field(result, "stderr"), _text_field(result, "stdout")
    output = "\n".join(part for part in (stderr, stdout, _text_field(result, "output")) if part.strip())
    if result.get("interrupted") is True:
        return output or "interrupted", True
    exit_codes = [result.get(name) for name in EXIT_CODE_FIELDS if isinstance(result.get(name), int)]
    error = _text_field(result, "error")
    if result.get("is_error") is True or any(code != 0 for code in exit_codes):
        return (error or output or error_text(result.get("content"))), False
    if error.strip():
        return error, False
    if str(tool_name or "") in SHELL_TOOLS and _STDERR_ERROR.search(stderr):
        return stderr, False
    return None


def _text_field(result: dict[str, Any], name: str) -> str:
    value = result.get(name)
    return value[:MAX_SCAN_CHARS] if isinstance(value, str) else ""


def error_text(error: Any) -> str:
    if isinstance(error, str):
        return error[:MAX_SCAN_CHARS]
    if isinstance(error, list):  # a tool result's content parts
        return "\n".join(_part_text(part) for part in error[:50])[:MAX_SCAN_CHARS]
    return "" if error is None else json.dumps(error)[:MAX_SCAN_CHARS]


def _part_text(part: Any) -> str:
    if isinstance(part, dict) and isinstance(part.get("text"), str):
        return str(part["text"])
    return part if isinstance(part, str) else ""


def _error_lines(text: str) -> list[str]:
    """The error's first informative lines: stripped (so no line reads as indented code),
    exit-status lines and `<tags>` left out."""
    kept: list[str] = []
    for raw in text.splitlines():
        line = " ".join(raw.replace("`", "'").split())
        if not line or _EXIT_STATUS.match(line) or (line.startswith("<") and line.endswith(">")):
            continue
        kept.append(shorten(line, MAX_ERROR_LINE_CHARS))
        if len(kept) == MAX_ERROR_LINES:
            break
    return kept


def command_of(tool_name: str, tool_input: Any) -> str:
    if not isinstance(tool_input, dict):
        return ""
    command = tool_input.get("command")
    if isinstance(command, str):
        return " ".join(command.replace("`", "'").split())
    shown = ", ".join(f"{k}={v}" for k, v in list(tool_input.items())[:3] if isinstance(v, str | int | float))
    return f"{tool_name}({shorten(shown, MAX_COMMAND_CHARS)})" if shown else ""


def _is_transient(text: str) -> bool:
    return bool(_TRANSIENT.search(text) or _TRANSIENT_V5.search(text))


def _guessed_a_name(command: str, error: str) -> bool:
    """The tool offers a near name, or says a name the command itself gave is not there
    (a project, a target, a model): the agent guessed it (v5). A name the command does not
    give (a profile, a connection a config refers to) stays a learning."""
    if _ENVIRONMENT_FAILURE.search(error):
        return False
    if _NEAR_NAME.search(error):
        return True
    words = {word.strip("'\"`,:=") for word in _options_aside(command.split()[:60])}
    for line in error.splitlines()[:20]:
        # A command or plugin that is not there is the environment's (`cargo nextest`).
        if not _NAME_NOT_THERE.search(line) or _MISSING_COMMAND.search(line):
            continue
        for quoted in _QUOTED_NAME.finditer(line):
            if quoted.group(1).rsplit("/", 1)[-1] in words or quoted.group(1) in words:
                return True
    return False


def _options_aside(words: list[str]) -> list[str]:
    """A command's words without its options, `--bin=x` read as `x`."""
    kept = []
    for word in words:
        if word.startswith("-"):
            if "=" in word:
                kept.append(word.split("=", 1)[1])
            continue
        kept.append(word)
    return kept


def _is_red_test(command: str, error: str) -> bool:
    """A test run that failed on its assertions, with nothing wrong around the code."""
    if not _TEST_RUN.search(command) or _ENVIRONMENT_FAILURE.search(error):
        return False
    return any(_ASSERTION_FAILURE.search(line.strip()) for line in error.splitlines()[:60])


def _is_code_verdict(command: str, error: str) -> bool:
    """A compiler, type checker or linter that found errors in the code, with nothing wrong
    around the code: the agent's own slip, fixed by its next edit."""
    if not (_CHECK_RUN.search(command) or _LINT_RUN.search(command)) or _ENVIRONMENT_FAILURE.search(error):
        return False
    return any(_CODE_DIAGNOSTIC.search(line.strip()) for line in error.splitlines()[:60])


def _is_read_probe(command: str, error: str) -> bool:
    """A subcommand that only reads (`kubectl get`, `gh pr view`) and found nothing."""
    program = program_of(command)
    # Options aside before paths are cut: `-chdir=stacks/data` is no subcommand (v5).
    words = [word.rsplit("/", 1)[-1] for word in command.split() if not word.startswith("-")]
    if program not in words:
        return False
    rest = words[words.index(program) + 1 :][:2]
    return any(word in READ_SUBCOMMANDS for word in rest) and bool(_NOT_THERE.search(error))


def _names_a_missing_file(command: str, lines: list[str]) -> bool:
    """The error says a path the command itself names is not there (a typo, a guess); a
    path the command does not name (a tool, a file a script reads) is something to learn."""
    paths = {
        word.strip("'\"")
        for word in command.split()[:60]
        if not word.startswith("-") and ("/" in word or "." in word.strip("'\".")) and len(word) > 3
    }
    for line in lines:
        lowered = line.lower()
        if "command not found" in lowered:
            continue
        for path in paths:
            at = line.find(path)
            if at < 0:
                continue
            after, before = line[at + len(path) : at + len(path) + 50], line[max(0, at - 40) : at]
            cue_after = _MISSING_FILE.search(after)
            if cue_after is not None and _ONLY_PUNCTUATION.match(after[: cue_after.start()]):
                return True
            if _MISSING_FILE.search(before) and before.rstrip(" '\"").endswith(":"):
                return True
    return False


def _program_and_subcommand(command: str) -> tuple[str, str]:
    """`pip show x` -> ("pip", "show"): the first word after the program, long options aside."""
    program = program_of(command)
    words = [word.rsplit("/", 1)[-1] for word in command.split()]
    if program not in words:
        return program, ""
    rest = [word for word in words[words.index(program) + 1 :] if not word.startswith("--")]
    return program, (rest[0] if rest else "")


def program_of(command: str) -> str:
    """The program a shell command runs: past `cd x &&`, `sudo`, env assignments."""
    words = command.split()
    while words:
        word = words[0]
        if word in ("sudo", "time", "env", "nohup") or ("=" in word and not word.startswith("-")):
            words = words[1:]
        elif word == "cd" and "&&" in words:
            words = words[words.index("&&") + 1 :]
        else:
            return word.rsplit("/", 1)[-1]
    return ""


# ---------------------------------------------------------------------- helpers


def shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return (cut if len(cut) > limit // 2 else text[:limit]) + "…"


def normalise(text: str) -> str:
    """Case, digits and spacing aside: one failure's runs differ in line numbers and ids."""
    return " ".join(re.sub(r"\d+", "0", text.lower()).split())


def fingerprint_of(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]
