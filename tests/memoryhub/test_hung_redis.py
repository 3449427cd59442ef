"""A Redis that hangs (accepts, never answers) costs requests a bounded moment, not the
web threads (docs/indexing-and-workers.md, "Redis in the request path").

The real server on a Redis of the test's own that the test SIGSTOPs
(tests/memoryhub/hung_redis.py). Every use of Redis in a request path is bounded: the
throttles' counts in the cache (they let the request through), and a save's enqueue of
its indexing (the entry stays pending for the reconcile job). So while Redis hangs a save
answers 201 and reads answer 200, each well within BOUND_SECONDS; once Redis answers
again, beat's reconcile job has the worker index the entry. Before, redis-py's and
kombu's 5 s answer timeouts made a save take 10 s and a list 5 s."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from memories.models import Memory
from teams.models import Team
from tests.conftest import operator_view
from tests.memoryhub.hung_redis import hung_redis_stack
from tests.worker import CeleryProcess, index_state, schedule_every_second, wait_for, wait_for_index_state

pytestmark = pytest.mark.django_db(transaction=True)


def queued_at(team: Team, saved: httpx.Response) -> datetime | None:
    assert saved.status_code == 201, saved.text
    with operator_view():
        return Memory.objects.get(team=team, id=saved.json()["id"]).index_queued_at


# Generous, to stay robust on a loaded machine: the bound is MEMORYHUB_REDIS_REQUEST_TIMEOUT_SECONDS
# (0.25 s) per step, and `make drill` measures what requests really take.
BOUND_SECONDS = 2.0
RECOVERY_SECONDS = 60.0  # a hang detector


def test_while_redis_hangs_saves_and_reads_answer_within_the_bound_and_the_entry_is_indexed_after(
    team: Team,
    tmp_path: Path,
    start_worker: Callable[..., CeleryProcess],
    start_beat: Callable[..., CeleryProcess],
) -> None:
    with hung_redis_stack(team=team, tmp_path=tmp_path, start_worker=start_worker) as stack:
        # Before: the server's connections to Redis are open and in use.
        before, _ = stack.save("before", "Saved while Redis answered.")
        assert before.status_code == 201, before.text
        wait_for_index_state(team.id, "before")
        # The server's first search sets up its search path (0.4 s on a quiet machine, past
        # the bound on a loaded one): done before, so the bound measures the waits on Redis.
        warm, _ = stack.timed("POST", "search/", json={"query": "Redis"})
        assert warm.status_code == 200, warm.text

        stack.hang()
        saved, save_seconds = stack.save("during", "Saved while Redis hung.")
        listed, list_seconds = stack.timed("GET", "memories/")
        read, read_seconds = stack.timed("GET", "memories/before/")
        searched, search_seconds = stack.timed("POST", "search/", json={"query": "Redis"})
        again, again_seconds = stack.save("during-again", "Saved while Redis still hung.")

        assert saved.status_code == 201, saved.text
        assert saved.json()["index_state"] == "pending"
        answers = [listed, read, searched]
        assert [r.status_code for r in answers] == [200, 200, 200], [r.text for r in answers]
        assert {"before", "during"} <= {entry["key"] for entry in listed.json()["results"]}
        assert again.status_code == 201, again.text
        timings = {
            "save": save_seconds,
            "list": list_seconds,
            "read": read_seconds,
            "search": search_seconds,
            "second save": again_seconds,
        }
        assert max(timings.values()) < BOUND_SECONDS, timings
        # Pending and not queued: no lease holds them back from the reconcile job.
        with operator_view():
            left = set(Memory.objects.filter(team=team).values_list("key", "index_state", "index_queued_at"))
        assert {("during", "pending", None), ("during-again", "pending", None)} <= left, left

        stack.resume()
        schedule_every_second("search.reconcile_index_states")
        start_beat(stack.worker.env["MEMORYHUB_QUEUE"], broker_url=stack.redis.url)
        wait_for(
            lambda: index_state(team.id, "during") == index_state(team.id, "during-again") == "indexed",
            RECOVERY_SECONDS,
            "the reconcile job to have the entries saved during the hang indexed",
        )
        # And the server publishes again by itself: a save keeps its lease (it was handed over).
        after = itertools.count()
        wait_for(
            lambda: (
                queued_at(team, stack.save(f"after-{next(after)}", "Saved after the hang.")[0]) is not None
            ),
            RECOVERY_SECONDS,
            "a save to be handed to the broker again",
        )
