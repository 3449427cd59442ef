"""Reading PostgreSQL's plans in tests: `EXPLAIN (FORMAT JSON)`, optionally with
ANALYZE and BUFFERS, flattened to a list of nodes, first the root."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from django.db import connection, transaction


def plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from plan_nodes(child)


def explain(sql: str, params: list[Any] | None, *, analyze: bool = False) -> list[dict[str, Any]]:
    """The nodes of the plan PostgreSQL chooses for `sql` (run when `analyze`, with its
    buffer counts). `params` None: `sql` is complete, as a captured query is."""
    options = "ANALYZE, BUFFERS, FORMAT JSON" if analyze else "FORMAT JSON"
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN ({options}) {sql}", params)
        document = cursor.fetchone()[0]
    return list(plan_nodes(document[0]["Plan"]))


def explain_prepared(sql: str, params: dict[str, Any], plan_cache_mode: str) -> list[dict[str, Any]]:
    """The nodes of the plan of `sql` (named parameters) as a prepared statement, as
    core.prepared_statements runs it once hot: custom or generic as `plan_cache_mode`
    forces."""
    names: list[str] = []

    def numbered(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    statement = re.sub(r"%\((\w+)\)s", numbered, sql)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL plan_cache_mode = {plan_cache_mode}")
        cursor.execute(f"PREPARE explained AS {statement}")
        try:
            arguments = ", ".join(["%s"] * len(names))
            cursor.execute(
                f"EXPLAIN (FORMAT JSON) EXECUTE explained ({arguments})", [params[n] for n in names]
            )
            document = cursor.fetchone()[0]
        finally:
            cursor.execute("DEALLOCATE explained")
    return list(plan_nodes(document[0]["Plan"]))


def scans_of(nodes: list[dict[str, Any]], relation: str) -> list[dict[str, Any]]:
    """The nodes that read `relation` (its heap or one of its indexes)."""
    return [n for n in nodes if n.get("Relation Name") == relation]


def rows_read(nodes: list[dict[str, Any]]) -> int:
    """Rows the nodes produced or filtered out, over all their loops (ANALYZE only)."""
    return sum(
        int((n["Actual Rows"] + n.get("Rows Removed by Filter", 0)) * n.get("Actual Loops", 1)) for n in nodes
    )


def buffers(nodes: list[dict[str, Any]]) -> int:
    """Shared buffers the whole statement touched, hit or read (ANALYZE only: the root
    node's counts include its children's)."""
    return int(nodes[0]["Shared Hit Blocks"] + nodes[0]["Shared Read Blocks"])
