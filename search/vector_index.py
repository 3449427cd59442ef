"""One partial HNSW index per embedding model.

`ChunkEmbedding.embedding` has no fixed dimensions, so that models of different sizes
live side by side. pgvector indexes only fixed-size vectors, so each model gets an
expression index on `embedding::vector(n)` limited to its own rows, and the vector
query repeats exactly that expression and that condition so the planner can use it.
"""

from __future__ import annotations

import hashlib

from django.db import connection
from psycopg import sql

TABLE = "search_chunkembedding"


def index_name(model: str) -> str:
    return f"chunk_hnsw_{hashlib.sha256(model.encode()).hexdigest()[:16]}"


def create_index_sql(model: str, dimensions: int) -> str:
    return (
        sql.SQL(
            "CREATE INDEX IF NOT EXISTS {name} ON {table} USING hnsw "
            "((embedding::vector({dims})) vector_cosine_ops) WHERE model = {model}"
        )
        .format(
            name=sql.Identifier(index_name(model)),
            table=sql.Identifier(TABLE),
            dims=sql.Literal(int(dimensions)),
            model=sql.Literal(model),
        )
        .as_string()
    )


def drop_index_sql(model: str) -> str:
    return sql.SQL("DROP INDEX IF EXISTS {name}").format(name=sql.Identifier(index_name(model))).as_string()


def ensure_index(model: str, dimensions: int) -> None:
    """Create the model's HNSW index if it is missing (idempotent)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s", [index_name(model)])
        if cursor.fetchone():
            return
        # CREATE INDEX refuses to run while deferred foreign-key checks of this
        # transaction are pending: run them now, then defer again (Django's default).
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        # Only the table's owner may index it: the owner's function does (teams.0008_roles).
        cursor.execute("SELECT memoryhub_ensure_vector_index(%s, %s)", [model, int(dimensions)])
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")
