"""A search's statements are bounded (MEMORYHUB_SEARCH_STATEMENT_TIMEOUT_MS): one that
cannot finish (here: waiting on a table another session holds locked, as a bad plan
would run on) is cancelled by PostgreSQL and the search answers 503 with the one error
shape, instead of holding a connection until the lock or the plan ends."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from django.db import connection, transaction
from django.test import override_settings

from core.db_router import statements_limited_to
from tests.conftest import Agent, search

pytestmark = pytest.mark.django_db(transaction=True)

# If the limit did not work, the lock is let go after this and the search answers 200,
# so the test fails instead of hanging.
SAFETY_RELEASE_SECONDS = 30


@contextmanager
def _locked(table: str) -> Iterator[psycopg.Connection]:
    """Another session holding `table` locked until it rolls back (at the latest after
    SAFETY_RELEASE_SECONDS)."""
    params = connection.get_connection_params()
    holder = psycopg.connect(**{k: v for k, v in params.items() if k != "cursor_factory"})
    holder.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
    safety = threading.Timer(SAFETY_RELEASE_SECONDS, holder.rollback)
    safety.start()
    try:
        yield holder
    finally:
        safety.cancel()
        holder.rollback()
        holder.close()


@pytest.fixture
def locked_keyword_stats() -> Iterator[psycopg.Connection]:
    """The keyword statistics table, which every search reads, held by another session."""
    with _locked("search_keywordstat") as holder:
        yield holder


@override_settings(MEMORYHUB_SEARCH_STATEMENT_TIMEOUT_MS=300)
def test_a_search_that_cannot_finish_answers_503_and_the_next_one_works(
    member: Agent, locked_keyword_stats: psycopg.Connection
) -> None:
    # As a server answers: the failure becomes the 503 page, not an exception in the test.
    member.client.raise_request_exception = False
    response = member.client.post(member.url("search/"), {"query": "deploy checklist"}, format="json")

    assert response.status_code == 503, response.content
    assert response.json()["error"] == "database_unavailable"
    assert int(response["Retry-After"]) > 0

    locked_keyword_stats.rollback()
    assert search(member, "deploy checklist")["results"] == []


@pytest.fixture
def locked_vectors() -> Iterator[psycopg.Connection]:
    """The vectors' table, which the vector path's exact scan reads (in one round trip
    with its setting and the setting's restoring), held by another session."""
    with _locked("search_chunkembedding") as holder:
        yield holder


@override_settings(MEMORYHUB_SEARCH_STATEMENT_TIMEOUT_MS=300)
def test_a_vector_scan_that_cannot_finish_answers_503_and_the_next_search_works(
    member: Agent,
    save,
    request: pytest.FixtureRequest,  # type: ignore[no-untyped-def]
) -> None:
    save(member, "deploys", "The deploy checklist lives in the runbook.")
    # The first search counts the team's vectors (kept a minute), so the locked table
    # is met by the exact scan itself.
    assert search(member, "deploy checklist")["search_mode"] == "hybrid"
    holder = request.getfixturevalue("locked_vectors")
    member.client.raise_request_exception = False

    response = member.client.post(member.url("search/"), {"query": "deploy checklist"}, format="json")

    assert response.status_code == 503, response.content
    assert response.json()["error"] == "database_unavailable"
    holder.rollback()
    assert [r["key"] for r in search(member, "deploy checklist")["results"]] == ["deploys"]


def test_the_limit_holds_inside_the_block_and_is_put_back_after_it() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        before = cursor.fetchone()[0]

    with transaction.atomic():
        with statements_limited_to(1234):
            with connection.cursor() as cursor:
                cursor.execute("SHOW statement_timeout")
                inside = cursor.fetchone()[0]
        with connection.cursor() as cursor:
            cursor.execute("SHOW statement_timeout")
            after = cursor.fetchone()[0]

    assert inside == "1234ms"
    assert after == before
