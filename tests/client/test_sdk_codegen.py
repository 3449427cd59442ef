"""The SDK's generated files match what `make sdk` makes now: the answers' TypedDicts
(memoryhub_client/types.py) from the server's OpenAPI schema, and the reference section of
docs/sdk.md from the SDK's docstrings and signatures."""

from __future__ import annotations

from tests.client import sdk_codegen

STALE = "is stale: run `make sdk` and commit the result"


def test_the_answer_types_are_the_servers_schema() -> None:
    assert sdk_codegen.TYPES_FILE.read_text() == sdk_codegen.types_module(), (
        f"memoryhub_client/types.py {STALE}"
    )


def test_the_reference_is_the_sdks_docstrings() -> None:
    current = sdk_codegen.REFERENCE_FILE.read_text()

    assert current == sdk_codegen.reference_page(current), f"docs/sdk.md {STALE}"
