"""The capture rules (memoryhub_client.capture), one rule at a time: pure functions, no
server. The bench (tests/bench/capture.py) measures them on labelled sessions; these
pin what each rule does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memoryhub_client import capture, capture_corrections, capture_transcripts
from memoryhub_client.capture import failure_learning
from memoryhub_client.capture_corrections import MAX_QUOTE_CHARS, correction_learning
from memoryhub_client.capture_hooks import PROMPT_CONTEXT_BYTES, prompt_learning
from memoryhub_client.capture_transcripts import transcript_learnings
from tests.linear_time import assert_linear_time


def bash_failure(command: str, error: str, **extra: Any) -> Any:
    return failure_learning("Bash", {"command": command}, error, source="toolu_1", **extra)


def test_a_failure_reads_as_the_command_and_the_errors_first_informative_lines() -> None:
    learning = bash_failure(
        "make   build",
        "Exit code 2\n\n    make: *** No rule to make target `build'.\nline two\nline three\nline four",
    )
    assert learning is not None
    assert (
        learning.text
        == "`make build` failed: make: *** No rule to make target 'build'. / line two / line three"
    )
    assert learning.as_draft_text().startswith("Learning: `make build` failed:")
    assert (learning.kind, learning.source) == ("error", "toolu_1")


@pytest.mark.parametrize(
    ("tool", "tool_input", "error", "extra"),
    [
        ("Bash", {"command": "pytest"}, "Exit code 1\nboom", {"is_interrupt": True}),
        ("Bash", {"command": "rm -rf x"}, "The user doesn't want to proceed with this tool use.", {}),
        ("Bash", {"command": "pip install x"}, "ReadTimeoutError: Read timed out.", {}),
        ("Bash", {"command": "gh api x"}, "HTTP 429: API rate limit exceeded", {}),
        ("Bash", {"command": "./manage.py migrate"}, "OperationalError: database is locked", {}),
        ("Read", {"file_path": "/x.py"}, "File does not exist.", {}),
        ("Edit", {"file_path": "/x.py"}, "String to replace not found in file.", {}),
        ("Bash", {"command": "grep -rn foo ."}, "Exit code 1", {}),
        ("Bash", {"command": "cd /repo && cat nope.txt"}, "cat: nope.txt: No such file or directory", {}),
        ("Bash", {"command": "make"}, "Exit code 2", {}),
        ("Bash", {"command": "npm ci"}, "npm ERR! network socket hang up", {}),
        ("Bash", {"command": "pip show pyyaml"}, "WARNING: Package(s) not found: pyyaml", {}),
        ("Bash", {"command": "git rev-parse --verify feature/x"}, "fatal: Needed a single revision", {}),
        (
            "Bash",
            {"command": "pytest tests/test_dates.py -q"},
            "Exit code 1\nFAILED tests/test_dates.py::test_week - AssertionError: assert None == 5",
            {},
        ),
        ("Bash", {"command": "npx jest cart"}, "Expected: 3\nReceived: 2\nTests: 1 failed, 4 passed", {}),
        (
            "Bash",
            {"command": "go test ./..."},
            "--- FAIL: TestTotal (0.00s)\n    total_test.go:12: got 9",
            {},
        ),
    ],
    ids=[
        "interrupt",
        "declined",
        "timeout",
        "rate-limit",
        "lock",
        "lookup",
        "bookkeeping",
        "probe",
        "reader",
        "bare",
        "socket-hang-up",
        "package-probe",
        "ref-probe",
        "red-pytest",
        "red-jest",
        "red-go-test",
    ],
)
def test_failures_that_are_no_learning(tool: str, tool_input: Any, error: str, extra: dict[str, Any]) -> None:
    assert failure_learning(tool, tool_input, error, **extra) is None


@pytest.mark.parametrize(
    ("command", "error"),
    [
        ("pytest tests/api", "E   ModuleNotFoundError: No module named 'yaml'\n1 failed"),
        ("cargo test", "error: linker 'cc' not found\ntest result: FAILED"),
        ("pnpm --filter web test", "Error: Cannot find module '@acme/ui/dist/index.js'"),
        ("pytest -m slow", "E   psycopg.OperationalError: connection refused\n3 failed"),
    ],
)
def test_a_test_run_broken_by_its_environment_is_a_learning(command: str, error: str) -> None:
    assert bash_failure(command, error) is not None


def test_one_failure_seen_again_with_other_numbers_has_one_fingerprint() -> None:
    first = bash_failure("pytest tests/a.py", "E   ImportError at line 12")
    again = bash_failure("pytest tests/a.py", "E   ImportError at line 14")
    other = bash_failure("pytest tests/b.py", "E   ImportError at line 12")
    assert first is not None and again is not None and other is not None
    assert first.fingerprint == again.fingerprint != other.fingerprint


@pytest.mark.parametrize(
    "prompt",
    [
        "No, we use pnpm here, not npm.",
        "Nope, the config lives in settings/base.py.",
        "Wrong branch, we open PRs against develop.",
        "Never edit the generated client by hand.",
        "Please stop adding type: ignore comments.",
        "Use httpx instead of requests in the lambda.",
        "Right, we only use pnpm in this repo.",
        "Hmm, not quite: the discount applies before tax.",
        "Wait, don't run migrations against production from your machine.",
        "Yes, use npx for CLIs, we don't install anything globally.",
        "That's not how we name migrations here: the ticket number goes first.",
        "Use the logger, not print.",
    ],
)
def test_corrections(prompt: str) -> None:
    learning = correction_learning(prompt)
    assert learning is not None and learning.text == f'the user corrected the agent: "{prompt}"'


@pytest.mark.parametrize(
    "prompt",
    [
        "no",
        "No worries, thanks!",
        "no, that's all",
        "Should we always use poetry?",
        "Don't forget to update the docs.",
        "Actually just run the api tests for now.",
        "Don't touch the serializers in this change.",
        "Show it as a bar chart instead of a pie.",
        "/compact",
        "<command-name>/clear</command-name>",
        "Add a CSV export to the orders page.",
        "Never mind, leave it as it is.",
        "Nevermind, forget the header.",
        "Ok, thanks, that looks good.",
        "Wait, what does this flag do?",
    ],
)
def test_not_corrections(prompt: str) -> None:
    assert correction_learning(prompt) is None


def test_a_long_correction_is_quoted_in_part() -> None:
    learning = correction_learning("No, " + "we keep the old importer " * 40)
    assert learning is not None
    assert len(learning.text) < MAX_QUOTE_CHARS + 40 and learning.text.endswith('…"')


def record(role: str, content: Any) -> dict[str, Any]:
    return {"type": role, "message": {"role": role, "content": content}}


def call(call_id: str, command: str) -> dict[str, Any]:
    return record(
        "assistant", [{"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}}]
    )


def result(call_id: str, content: str, *, failed: bool) -> dict[str, Any]:
    part = {"type": "tool_result", "tool_use_id": call_id, "content": content}
    return record("user", [{**part, "is_error": True} if failed else part])


def test_a_transcript_names_the_fix_and_leaves_a_flake_out() -> None:
    records = [
        record("user", "Run the tests."),
        call("a", "npm test"),
        result("a", "Error: ENOSPC: file watchers", failed=True),
        call("b", "npm test -- --runInBand"),
        result("b", "40 passed", failed=False),
        call("c", "make deploy"),
        result("c", "Error: cluster unreachable", failed=True),
        call("d", "make deploy"),
        result("d", "deployed", failed=False),
        {"type": "summary", "summary": "No, never do this."},
        record("user", "No, never run the whole suite, it takes ten minutes."),
    ]
    found = transcript_learnings(records)
    assert [(learning.source, learning.text) for learning in found] == [
        ("a", "`npm test` failed: Error: ENOSPC: file watchers; then `npm test -- --runInBand` worked"),
        ("prompt:1", 'the user corrected the agent: "No, never run the whole suite, it takes ten minutes."'),
    ]


@pytest.mark.parametrize(
    "name",
    [
        "_DECLINED",
        "_TRANSIENT",
        "_EXIT_STATUS",
        "_RULE_SENTENCE",
        "_ONE_OFF",
        "_TEST_RUN",
        "_ASSERTION_FAILURE",
        "_ENVIRONMENT_FAILURE",
        "_INTERJECTION",
        "_NEGATION_OPENER",
    ],
)
def test_each_pattern_takes_time_linear_in_the_text(name: str) -> None:
    # The hooks bound what they scan (MAX_SCAN_CHARS); the patterns stay linear regardless.
    pattern = getattr(capture, name, None) or getattr(capture_corrections, name)

    def text(size: int) -> str:
        return ("we use it instead of not use " * (size // 29 + 1))[:size]

    assert_linear_time(pattern.search, text, 256 * 1024)


def test_a_transcript_leaves_out_a_failure_the_agent_fixed_with_its_own_edits() -> None:
    edit = record(
        "assistant",
        [{"type": "tool_use", "id": "e", "name": "Edit", "input": {"file_path": "/a.go", "old_string": "x"}}],
    )
    records = [
        record("user", "Make it build."),
        call("a", "go build ./..."),
        result("a", "main.go:9:2: undefined: totl", failed=True),
        edit,
        result("e", "The file has been updated.", failed=False),
        call("b", "go build ./..."),
        result("b", "", failed=False),
        call("c", "make deploy"),
        result("c", "Error: KUBECONFIG points at a missing file", failed=True),
        call("d", "kubectl config use-context staging"),
        result("d", "Switched", failed=False),
        call("f", "make deploy"),
        result("f", "deployed", failed=False),
    ]
    assert [learning.source for learning in transcript_learnings(records)] == ["c"]


# ---------------------------------------------------------------------- v4


@pytest.mark.parametrize(
    ("command", "error"),
    [
        (
            "docker pull ghcr.io/acme/base:3.12",
            'Get "https://ghcr.io/v2/": dial tcp: lookup ghcr.io: no such host',
        ),
        ("git fetch origin", "fatal: the remote end hung up unexpectedly"),
        (
            "bundle exec rspec spec/a_spec.rb",
            "Failure/Error: expect(a).to be(true)\n  expected true\n  got false",
        ),
        (
            "mix test test/slug_test.exs",
            "** (UndefinedFunctionError) function Blog.slug/1 is undefined\n1 test, 1 failure",
        ),
        (
            "./gradlew test --tests acme.T",
            "T > rounds() FAILED\n  org.opentest4j.AssertionFailedError: expected: <1>",
        ),
        ("cargo test", "thread 'total' panicked at src/lib.rs:9:5:\nassertion `left == right` failed"),
        ("go build ./...", "cmd/api/main.go:9:2: undefined: totl"),
        (
            "npx tsc --noEmit",
            "src/cart.ts(12,5): error TS2339: Property 'qty' does not exist on type 'Item'.",
        ),
        ("cargo check", "error[E0308]: mismatched types\n --> src/main.rs:4:5"),
        ("kubectl get pod api-7f -n prod", 'Error from server (NotFound): pods "api-7f" not found'),
        ("gh pr view", 'no pull requests found for branch "feat/x"'),
        (
            "git show origin/release:config.yaml",
            "fatal: path 'config.yaml' does not exist in 'origin/release'",
        ),
        ("npm run seed", 'npm ERR! Missing script: "seed"\nnpm ERR! To see a list of scripts, run:'),
        ("./gradlew integrationTest", "Task 'integrationTest' not found in root project 'api'."),
        (
            "python scripts/improt.py",
            "python: can't open file '/app/scripts/improt.py': [Errno 2] No such file",
        ),
        ("pytest tests/test_fo.py", "ERROR: file or directory not found: tests/test_fo.py"),
        ("kubectl apply -f k8s/deploy.yaml", 'error: the path "k8s/deploy.yaml" does not exist'),
    ],
    ids=[
        "dns",
        "remote-hung-up",
        "red-rspec",
        "red-mix",
        "red-gradle",
        "red-cargo-assertion",
        "go-build-slip",
        "tsc-slip",
        "cargo-check-slip",
        "kubectl-get-not-found",
        "gh-view-not-found",
        "git-show-not-found",
        "missing-npm-script",
        "missing-gradle-task",
        "named-script-missing",
        "named-test-file-missing",
        "named-manifest-missing",
    ],
)
def test_v4_failures_that_are_no_learning(command: str, error: str) -> None:
    assert bash_failure(command, error) is None


@pytest.mark.parametrize(
    ("command", "error"),
    [
        ("./scripts/deploy.sh staging", "./scripts/deploy.sh: line 12: helm: command not found"),
        ("bash scripts/seed.sh", "scripts/seed.sh: line 4: seed.sql: No such file or directory"),
        ("go build ./...", "go: go.mod requires go >= 1.22 (running go 1.21.5; GOTOOLCHAIN=local)"),
        ("mypy .", "src/app/config.py:14: error: X | Y syntax for unions requires Python 3.10  [syntax]"),
        ("npx tsc", "src/a.ts(1,20): error TS2307: Cannot find module '@acme/ui' or its type declarations."),
        ("kubectl get pods -n prod", "error: You must be logged in to the server (Unauthorized)"),
        ("make build", "make: *** No rule to make target 'build'."),
        ("cargo nextest run", "error: no such command: 'nextest'"),
        ("mix test", "** (Mix) Could not start application postgrex: could not connect to localhost:5432"),
    ],
)
def test_v4_keeps_what_the_environment_shows(command: str, error: str) -> None:
    assert bash_failure(command, error) is not None


@pytest.mark.parametrize("tool", ["BashOutput", "KillShell", "ExitPlanMode"])
def test_v4_the_agents_own_shell_bookkeeping_is_no_learning(tool: str) -> None:
    assert failure_learning(tool, {"shell_id": "b1"}, "Shell b1 not found") is None


@pytest.mark.parametrize(
    "prompt",
    [
        "We format with biome in this repo, prettier's config is left over.",
        "Not in .env, that one's committed. Local overrides go in .env.local.",
        "Actually, the release notes go in CHANGELOG.md, not in a separate file.",
        "Never run terraform apply locally, the pipeline owns the state.",
    ],
)
def test_v4_corrections(prompt: str) -> None:
    assert correction_learning(prompt) is not None


@pytest.mark.parametrize(
    "prompt",
    [
        "hmm, actually make it orange, red looks like an error",
        "Actually, just rename it to totals.",
        "Don't push it.",
        "No, just the backend.",
        "Don't commit yet, I want to look at the diff first.",
        "Don't merge until I have read it.",
        "we don't need tests for this script",
        "Leave the migrations alone for this ticket, never mind the lint warnings.",
    ],
)
def test_v4_not_corrections(prompt: str) -> None:
    assert correction_learning(prompt) is None


@pytest.mark.parametrize(
    "name",
    [
        "_CHECK_RUN",
        "_CODE_DIAGNOSTIC",
        "_UNKNOWN_SCRIPT",
        "_MISSING_FILE",
        "_ONLY_PUNCTUATION",
        "_NOT_THERE",
        "_TASK_VERB",
    ],
)
def test_each_v4_pattern_takes_time_linear_in_the_text(name: str) -> None:
    pattern = getattr(capture, name, None) or getattr(capture_corrections, name)

    def text(size: int) -> str:
        return ("src/a.go:1: no such no x x x found not ok 1 test, " * (size // 50 + 1))[:size]

    assert_linear_time(pattern.search, text, 256 * 1024)


def test_a_long_adversarial_failure_takes_time_linear_in_the_text() -> None:
    def work(error: str) -> object:
        return bash_failure("go build ./... " + "a/b.go " * 40, error)

    def text(size: int) -> str:
        return ("a/b.go: a/b.go a/b.go: no such file x/ " * (size // 40 + 1))[:size]

    # failure_learning scans at most MAX_SCAN_CHARS, so the growth is bounded, never quadratic.
    assert_linear_time(work, text, 256 * 1024)


# ---------------------------------------------------------------------- v5


@pytest.mark.parametrize(
    ("command", "error"),
    [
        ("terraform plan", "Error: Error acquiring the state lock\nLock Info:\n  Who: runner@ci"),
        ("flutter pub get", "Got socket error trying to find package http at https://pub.dev."),
        ("./gradlew connectedAndroidTest", "com.android.ddmlib.ShellCommandUnresponsiveException"),
        ("npx nx test billing", " NX   Cannot find project 'billing'"),
        ("cargo run --bin ingest", "error: no bin target named `ingest`.\n\tDid you mean `ingester`?"),
        ("cargo nexttest", "error: no such command: `nexttest`\n\n\tDid you mean `nextest`?"),
        ("actionlint", '.github/workflows/ci.yml:34:9: property "node-versions" is not defined [expression]'),
        ("hadolint Dockerfile", "Dockerfile:3 DL3008 warning: Pin versions in apt get install"),
        ("yamllint .", "deploy/values.yaml\n  3:1  error  wrong indentation: expected 2 but found 4"),
        (
            "terraform -chdir=stacks/data state show aws_s3_bucket.exports",
            "No instance found for the given address!",
        ),
    ],
    ids=[
        "terraform-state-lock",
        "socket-error",
        "unresponsive-emulator",
        "guessed-project",
        "guessed-bin-near-name",
        "guessed-subcommand-near-name",
        "actionlint-slip",
        "hadolint-slip",
        "yamllint-slip",
        "read-only-subcommand-past-chdir",
    ],
)
def test_v5_failures_that_are_no_learning(command: str, error: str) -> None:
    assert bash_failure(command, error) is None


@pytest.mark.parametrize(
    ("command", "error"),
    [
        # Names the command did not give: the project's environment, not a guess.
        ("dbt run --select stg_orders", "Runtime Error\n  Could not find profile named 'analytics'"),
        ("airflow dags test orders_daily 2026-11-01", "AirflowNotFoundException: The conn_id `warehouse` isn't defined"),
        # A named thing missing with an environment cue stays: the module is not installed.
        ("python -m build", "No module named 'build'"),
        ("tflint", "Failed to initialize plugins; Plugin `aws` not found. Did you run `tflint --init`?"),
    ],
)  # fmt: skip
def test_v5_keeps_names_the_command_did_not_give(command: str, error: str) -> None:
    assert bash_failure(command, error) is not None


@pytest.mark.parametrize(
    "prompt",
    [
        "Versions go in gradle/libs.versions.toml, the module build files only reference the catalog.",
        "Credentials only ever come from the environment, take that URL back out.",
        "Whoa, stop. Nobody applies from their own machine, Atlantis runs the apply.",
        "We log with zerolog everywhere in the services, with fields.",
        "Run the affected ones only. The full run is forty minutes on this monorepo.",
        "The webhook URL is a secret, it lives in the repo secrets.",
    ],
)
def test_v5_corrections_that_state_the_teams_practice(prompt: str) -> None:
    assert correction_learning(prompt) is not None


@pytest.mark.parametrize(
    "prompt",
    [
        "Don't touch the CI file until Marco's MR lands, he's rewriting the whole pipeline.",
        "Leave the Android side alone, Priya is reworking the navigation there.",
        "We need to listen for Postgres notifications in the worker.",
        "We'll revert it after the demo, just force the flag on.",
        "Stop the worker and start it again.",
        "Where does the config come from?",
    ],
)
def test_v5_not_corrections(prompt: str) -> None:
    assert correction_learning(prompt) is None


def text_record(role: str, text: str) -> dict[str, Any]:
    return record(role, [{"type": "text", "text": text}])


def test_v5_a_transcript_reads_an_answer_to_the_agents_question_as_an_answer() -> None:
    records = [
        text_record("assistant", "The branch has six commits. Do you want me to squash them?"),
        record("user", "No, keep them separate, it's easier to review that way."),
        text_record("assistant", "Shall I use npm?"),
        record("user", "No, we only use pnpm in this repo, never npm."),
        text_record("assistant", "Done."),
        record("user", "No, keep the old importer, the new one drops rows."),
    ]
    # The answer that states a rule stays; a "no" with no question before it is a correction.
    assert [learning.source for learning in transcript_learnings(records)] == ["prompt:1", "prompt:2"]
    # Per event (no transcript), the first is read as a correction: the hook cannot know.
    assert correction_learning("No, keep them separate, it's easier to review that way.") is not None


def test_v5_a_constraint_the_agents_edit_worked_around_stays_a_learning() -> None:
    edit = record(
        "assistant",
        [
            {
                "type": "tool_use",
                "id": "e",
                "name": "Edit",
                "input": {"file_path": "/m.sql", "old_string": "x"},
            }
        ],
    )
    records = [
        record("user", "Add the index and run the migration."),
        call("a", "goose up"),
        result("a", "ERROR: CREATE INDEX CONCURRENTLY cannot run inside a transaction block", failed=True),
        edit,
        result("e", "The file has been updated.", failed=False),
        call("b", "goose up"),
        result("b", "OK", failed=False),
    ]
    assert [learning.source for learning in transcript_learnings(records)] == ["a"]


@pytest.mark.parametrize(
    ("module", "name"),
    [
        (capture, "_TRANSIENT_V5"),
        (capture, "_LINT_RUN"),
        (capture, "_NEAR_NAME"),
        (capture, "_QUOTED_NAME"),
        (capture, "_NAME_NOT_THERE"),
        (capture, "_MISSING_COMMAND"),
        (capture_corrections, "_PLACEMENT"),
        (capture_corrections, "_UNIVERSAL"),
        (capture_corrections, "_WE_PRACTICE"),
        (capture_corrections, "_PROJECT_SCOPE"),
        (capture_corrections, "_TEMPORARY"),
        (capture_transcripts, "_CONSTRAINT"),
    ],
)
def test_each_v5_pattern_takes_time_linear_in_the_text(module: Any, name: str) -> None:
    pattern = getattr(module, name)

    def text(size: int) -> str:
        return (
            "until we 'a lint-lint `b no x named cannot run in goes in acquiring lock " * (size // 70 + 1)
        )[:size]

    assert_linear_time(pattern.search, text, 256 * 1024)
    assert_linear_time(lambda t: list(pattern.finditer(t)), text, 256 * 1024)


def test_a_long_adversarial_failure_with_quoted_names_takes_time_linear_in_the_text() -> None:
    def work(error: str) -> object:
        return bash_failure("nx test " + "'a' " * 40, error)

    def text(size: int) -> str:
        return ("'a' not found 'a' cannot find `a`\n" * (size // 35 + 1))[:size]

    assert_linear_time(work, text, 256 * 1024)


def test_v5_the_prompt_hook_reads_the_transcripts_tail_only_for_a_correction(tmp_path: Path) -> None:
    answer = "No, keep them separate, it's easier to review that way."
    transcript = tmp_path / "t.jsonl"
    question = {"type": "assistant", "message": {"role": "assistant", "content": "Squash them?"}}
    # A huge first record (cut by the tail read), a broken line, NUL and unicode: skipped.
    transcript.write_text(
        json.dumps({"x": "é\x00" * (PROMPT_CONTEXT_BYTES // 2)}) + "\n{broken\n" + json.dumps(question) + "\n"
    )

    assert prompt_learning(answer, str(transcript)) is None
    assert prompt_learning("Add a CSV export.", str(transcript)) is None
    # No transcript, or one that cannot be read: the prompt alone decides.
    assert prompt_learning(answer, None) is not None
    assert prompt_learning(answer, str(tmp_path / "missing.jsonl")) is not None
    assert prompt_learning(answer, str(tmp_path)) is not None  # a folder
