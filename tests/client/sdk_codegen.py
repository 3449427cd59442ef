"""What the SDK generates rather than types twice: `memoryhub_client/types.py`, the
TypedDicts of the answers it returns, from the server's OpenAPI schema; and the reference
section of `docs/sdk.md`, from the SDK's docstrings and signatures.

`make sdk` (`python -m tests.client.sdk_codegen`) writes both; `tests/client/test_sdk_codegen.py`
fails when a committed file differs from what this makes now (a serializer or a docstring
changed without `make sdk`). It lives with the tests because it needs the server's schema,
which the client (importing no app) cannot make."""

from __future__ import annotations

import inspect
import json
import keyword
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TYPES_FILE = ROOT / "memoryhub_client" / "types.py"
REFERENCE_FILE = ROOT / "docs" / "sdk.md"

# The answers the SDK's methods return; every schema they refer to comes along.
ROOT_SCHEMAS = (
    "MemorySavedOutput",
    "MemoryDuplicateOutput",
    "MemoryBatchOutput",
    "MemoryReadOutput",
    "MemoryDetailOutput",
    "MemoryOutput",
    "MemoryHistoryOutput",
    "SearchOutput",
    "InjectionOutput",
    "NudgeOutput",
    "DraftOutput",
    "DraftExtractOutput",
    "AgentSessionBootOutput",
    "AgentSessionOutput",
    "AnchoredEntry",
    "FactOutput",
    "FactSetOutput",
    "FactHistoryOutput",
    "Error",
)

_JSON_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}

TYPES_HEADER = '''"""The answers of a MemoryHub server, as the SDK returns them: TypedDicts of the JSON
bodies (a result is the server's JSON object, so `json.dumps` prints it as it came).

Generated from the server's OpenAPI schema by `make sdk` (tests/client/sdk_codegen.py):
do not edit by hand. A field's comment is its description in the schema."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict
'''


def openapi_schema() -> dict[str, Any]:
    """The server's OpenAPI schema, made in this process (Django set up, no server)."""
    import django

    django.setup()
    from drf_spectacular.generators import SchemaGenerator

    schema: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)
    return schema


class _TypesWriter:
    def __init__(self, components: dict[str, Any]) -> None:
        self.components = components
        self.order: list[str] = []

    def collect(self, name: str) -> None:
        if name in self.order or _is_null(self.components[name]):
            return
        self.order.append(name)
        for ref in _refs(self.components[name]):
            self.collect(ref)

    def annotation(self, spec: dict[str, Any]) -> str:
        if "$ref" in spec:
            name = _ref_name(spec["$ref"])
            return "None" if _is_null(self.components[name]) else name
        if "allOf" in spec and len(spec["allOf"]) == 1:
            inner = self.annotation(spec["allOf"][0])
        elif "oneOf" in spec:
            parts = [self.annotation(option) for option in spec["oneOf"]]
            inner = " | ".join(dict.fromkeys(parts))
        elif "enum" in spec:
            values = [value for value in spec["enum"] if value is not None]
            inner = f"Literal[{', '.join(json.dumps(value) for value in values)}]" if values else "None"
            if None in spec["enum"] and values:
                inner += " | None"
        elif spec.get("type") == "array":
            inner = f"list[{self.annotation(spec.get('items', {}))}]"
        elif spec.get("type") == "object":
            values = spec.get("additionalProperties")
            inner = f"dict[str, {self.annotation(values)}]" if isinstance(values, dict) else "dict[str, Any]"
        else:
            inner = _JSON_TYPES.get(spec.get("type", ""), "Any")
        if spec.get("nullable") and not inner.endswith("None") and inner != "Any":
            inner += " | None"
        return inner

    def definition(self, name: str) -> str:
        spec = self.components[name]
        if "properties" not in spec:
            return f"{name} = {self.annotation(spec)}\n"
        required = set(spec.get("required", []))
        lines = [f"class {name}(TypedDict):"]
        for field, field_spec in spec["properties"].items():
            if not field.isidentifier() or keyword.iskeyword(field):
                raise ValueError(f"{name}.{field} cannot be a TypedDict field")
            annotation = self.annotation(field_spec)
            if field not in required:
                annotation = f"NotRequired[{annotation}]"
            description = field_spec.get("description")
            if description:
                lines += textwrap.wrap(
                    _one_line(description), width=106, initial_indent="    # ", subsequent_indent="    # "
                )
            lines.append(f"    {field}: {annotation}")
        return "\n".join(lines) + "\n"


def types_module(schema: dict[str, Any] | None = None) -> str:
    schema = schema or openapi_schema()
    writer = _TypesWriter(schema["components"]["schemas"])
    for name in ROOT_SCHEMAS:
        writer.collect(name)
    # Aliases and enums first (evaluated when the module loads), then the classes, whose
    # annotations are lazy.
    simple = [name for name in writer.order if "properties" not in writer.components[name]]
    classes = [name for name in writer.order if "properties" in writer.components[name]]
    aliases = "".join(writer.definition(name) for name in sorted(simple))
    definitions = "\n\n".join(writer.definition(name) for name in sorted(classes))
    return f"{TYPES_HEADER}\n{aliases}\n\n{definitions}"


def _is_null(spec: dict[str, Any]) -> bool:
    """drf-spectacular's NullEnum: a value that may only be null, i.e. None."""
    return spec.get("enum") == [None]


def _refs(spec: Any) -> set[str]:
    if isinstance(spec, dict):
        found = {_ref_name(spec["$ref"])} if "$ref" in spec else set()
        for value in spec.values():
            found |= _refs(value)
        return found
    if isinstance(spec, list):
        return set().union(*(_refs(item) for item in spec)) if spec else set()
    return set()


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _one_line(text: str) -> str:
    return " ".join(str(text).split()).replace('"""', "'''")


# ----- the reference -----

# docs/sdk.md is written by hand down to this line; `make sdk` writes what follows it.
REFERENCE_MARKER = "<!-- Generated below by make sdk (tests/client/sdk_codegen.py): do not edit. -->"
REFERENCE_HEADER = """## Reference

Generated from the docstrings and signatures; `tests/client/test_sdk_codegen.py` fails when
this section and the code differ. The answers' fields are the TypedDicts of
`memoryhub_client.types`, generated from the server's OpenAPI schema (`/api/schema/`, the
reference for every field).
"""


def reference_markdown() -> str:
    import memoryhub_client
    from memoryhub_client import errors, types
    from memoryhub_client.context import windows

    sections = [REFERENCE_HEADER]
    for title, names in memoryhub_client.REFERENCE:
        sections.append(f"### {title}\n")
        for name in names:
            sections.append(_document(name, getattr(memoryhub_client, name)))
    sections.append("### Answer types\n")
    sections.append(
        "Each is a `TypedDict` in `memoryhub_client.types`; their fields and descriptions are the "
        "server's OpenAPI schema's.\n\n"
        + ", ".join(
            f"`{name}`"
            for name, value in sorted(vars(types).items())
            if inspect.isclass(value) and value.__module__ == types.__name__
        )
        + "\n"
    )
    sections.append("### Errors by status\n")
    sections.append(
        "| status | raised as |\n| --- | --- |\n"
        + "".join(
            f"| {status} | `{cls.__name__}` |\n" for status, cls in sorted(errors.ERRORS_BY_STATUS.items())
        )
        + f"| no answer | `{errors.ServerUnreachable.__name__}` |\n"
    )
    sections.append("### Model context windows\n")
    sections.append(
        "What `ContextManager` assumes when `window` is not given: the longest prefix of the model's "
        "name found here (tokens; `tokenizer`: the encoding counted with, or the heuristic).\n\n"
        "| model prefix | window | tokenizer |\n| --- | --- | --- |\n"
        + "".join(
            f"| `{prefix}` | {window:,} | {windows.encoding_of(prefix) or 'heuristic'} |\n"
            for prefix, window in windows.MODEL_WINDOWS.items()
        )
    )
    return "\n".join(sections)


def _document(name: str, item: Any) -> str:
    if inspect.isclass(item):
        return _document_class(name, item)
    return f"#### `{name}{_signature(item)}`\n\n{_doc(item)}\n"


def _document_class(name: str, cls: type) -> str:
    base = next((klass for klass in cls.__mro__[1:] if klass.__name__ in _documented()), None)
    if getattr(cls, "_is_protocol", False):
        signature = "(Protocol)"
    elif base is not None and cls.__init__ is base.__init__:
        signature = f"({base.__name__})"
    else:
        signature = _signature(cls).removesuffix(" -> None")
    parts = [f"#### class `{name}{signature}`\n\n{_doc(cls)}\n"]
    # An async twin documents only what differs from its sync class's members.
    twin = _sync_twin(cls)
    shared = [
        member_name
        for member_name, member in _members(cls)
        if twin is not None and inspect.getdoc(getattr(twin, member_name, None)) == inspect.getdoc(member)
    ]
    if shared:
        listed = ", ".join(f"`{member_name}`" for member_name in shared)
        parts.append(f"The same as `{twin.__name__}`'s, awaited: {listed}.\n")
    for member_name, member in _members(cls):
        if member_name in shared:
            continue
        if isinstance(member, property):
            parts.append(f"- **`{name}.{member_name}`** (property)\n\n{_indented(_doc(member))}\n")
        else:
            awaitable = (
                "await " if inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member) else ""
            )
            signature = _signature(member, drop_self=True)
            parts.append(f"- **`{awaitable}{name}.{member_name}{signature}`**\n\n{_indented(_doc(member))}\n")
    return "\n".join(parts)


def _sync_twin(cls: type) -> type | None:
    import memoryhub_client

    twin = (
        getattr(memoryhub_client, cls.__name__.removeprefix("Async"), None)
        if cls.__name__.startswith("Async")
        else None
    )
    return twin if inspect.isclass(twin) else None


def _documented() -> set[str]:
    import memoryhub_client

    return {name for _, names in memoryhub_client.REFERENCE for name in names}


def _members(cls: type) -> list[tuple[str, Any]]:
    """Public methods and properties defined by the class or its undocumented bases in
    memoryhub_client (a documented base's are on its own entry), in source order."""
    seen: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if not klass.__module__.startswith("memoryhub_client"):
            continue
        if klass is not cls and klass.__name__ in _documented():
            continue
        for member_name, member in vars(klass).items():
            if member_name.startswith("_") or not (callable(member) or isinstance(member, property)):
                continue
            if inspect.isclass(member):
                continue
            seen[member_name] = member
    return list(seen.items())


def _signature(item: Any, *, drop_self: bool = False) -> str:
    """The signature as the source writes it (annotations are strings there), with a
    method made from an operation answering what the operation's Call carries."""
    try:
        signature = inspect.signature(item)
    except (TypeError, ValueError):
        return "(...)"
    parts: list[str] = []
    star_done = False
    parameters = list(signature.parameters.values())
    if drop_self and parameters and parameters[0].name == "self":
        parameters = parameters[1:]
    for parameter in parameters:
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            star_done = True
        prefix = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}.get(
            parameter.kind, ""
        )
        text = prefix + parameter.name
        if parameter.annotation is not inspect.Parameter.empty:
            text += f": {_annotation(parameter.annotation)}"
        if parameter.default is not inspect.Parameter.empty:
            text += f" = {_default(parameter.default)}"
        parts.append(text)
    result = f"({', '.join(parts)})"
    if signature.return_annotation is not inspect.Signature.empty:
        returned = _annotation(signature.return_annotation)
        if returned.startswith("Call[") and returned.endswith("]"):
            returned = returned[len("Call[") : -1]
        result += f" -> {returned}"
    return result


def _annotation(annotation: Any) -> str:
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def _default(value: Any) -> str:
    text = repr(value)
    # An object's repr may name a memory address; its class says enough.
    return f"{type(value).__name__}(...)" if " at 0x" in text else text


def _indented(text: str) -> str:
    return "\n".join(f"  {line}" if line else "" for line in text.splitlines())


def reference_page(current: str) -> str:
    """docs/sdk.md as it should be: its hand-written part, then the reference."""
    if REFERENCE_MARKER not in current:
        raise ValueError(f"docs/sdk.md lacks the line {REFERENCE_MARKER!r}")
    return current.split(REFERENCE_MARKER)[0] + REFERENCE_MARKER + "\n\n" + reference_markdown()


def _doc(item: Any) -> str:
    doc = inspect.getdoc(item)
    if not doc:
        raise ValueError(f"{getattr(item, '__qualname__', item)} has no docstring: the reference needs one")
    return doc


def main(argv: list[str]) -> int:
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings_test")
    TYPES_FILE.write_text(types_module())
    REFERENCE_FILE.write_text(reference_page(REFERENCE_FILE.read_text()))
    print(f"wrote {TYPES_FILE.relative_to(ROOT)} and {REFERENCE_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
