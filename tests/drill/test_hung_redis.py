"""Fault drill: Redis hangs under load. The embedded Redis is SIGSTOPped (it accepts and
never answers) while agents save and read: every request answers as usual (saves 201,
their entries pending; reads 200) within the request path's bound, and once Redis
answers again (SIGCONT) beat's reconcile job has the worker index every entry saved
meanwhile: nothing is lost. Records the latency of saves and reads during the hang."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memories.models import Memory
from teams.models import Team
from tests.conftest import operator_view
from tests.drill.record import outage_seconds, record
from tests.memoryhub.hung_redis import HungRedisStack, hung_redis_stack
from tests.worker import CeleryProcess, schedule_every_second, wait_for, wait_for_index_state

pytestmark = [pytest.mark.drill, pytest.mark.django_db(transaction=True)]

CLIENTS = 4  # as many agents at once as the server has threads
PAUSE_SECONDS = 0.1  # each agent's think time between requests
MAX_REQUESTS_PER_CLIENT = 2_000  # the load's bound besides its time
RECOVERY_SECONDS = 300.0  # a hang detector; the figure is recorded, not asserted


class Agent(threading.Thread):
    """Saves a new key, then lists the team's entries, then reads the key back, until the
    hang ends; records (kind, status, seconds) of every request and the keys saved."""

    def __init__(self, stack: HungRedisStack, name: str, until: float) -> None:
        super().__init__(daemon=True)
        self.stack, self.label, self.until = stack, name, until
        self.answers: list[tuple[str, int, float]] = []
        self.saved: list[str] = []

    def run(self) -> None:
        with self.stack.new_agent() as client:
            for number in range(MAX_REQUESTS_PER_CLIENT):
                if time.monotonic() >= self.until:
                    return
                key = f"{self.label}-{number}"
                saved, seconds = self.stack.save(
                    key, f"Saved by {self.label} during the hang, number {number}.", client
                )
                self.answers.append(("save", saved.status_code, seconds))
                if saved.status_code == 201:
                    self.saved.append(key)
                for path in ("memories/", f"memories/{key}/"):
                    read, seconds = self.stack.timed("GET", path, client)
                    self.answers.append(("read", read.status_code, seconds))
                time.sleep(PAUSE_SECONDS)  # the scenario's pace: an agent between requests


def percentiles_ms(seconds: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(seconds, n=100, method="inclusive")
    return {
        "p50": round(cuts[49] * 1000, 1),
        "p95": round(cuts[94] * 1000, 1),
        "max": round(max(seconds) * 1000, 1),
    }


def test_requests_during_a_redis_hang_answer_as_usual_and_every_entry_is_indexed_after(
    team: Team,
    tmp_path: Path,
    start_worker: Callable[..., CeleryProcess],
    start_beat: Callable[..., CeleryProcess],
) -> None:
    # The drill measures the hang, not the limits: the rates' counts are still read from
    # Redis, and the agents share one address, which may have all the server's threads.
    limits = {
        "MEMORYHUB_THROTTLE_READ": "100000/min",
        "MEMORYHUB_THROTTLE_WRITE": "100000/min",
        "MEMORYHUB_IN_FLIGHT_PER_CLIENT": str(CLIENTS),
    }
    with hung_redis_stack(team=team, tmp_path=tmp_path, start_worker=start_worker, **limits) as stack:
        before, _ = stack.save("before", "Saved while Redis answered.")
        assert before.status_code == 201, before.text
        wait_for_index_state(team.id, "before")

        stack.hang()
        hung_for = outage_seconds(default=5.0)
        agents = [Agent(stack, f"agent{n}", time.monotonic() + hung_for) for n in range(CLIENTS)]
        for agent in agents:
            agent.start()
        for agent in agents:
            agent.join(hung_for + 120)
        assert not any(agent.is_alive() for agent in agents), "an agent is still waiting for an answer"
        saved = [key for agent in agents for key in agent.saved]
        with operator_view():
            pending_at_resume = Memory.objects.filter(key__in=saved, index_state="pending").count()

        stack.resume()
        resumed_at = time.monotonic()
        schedule_every_second("search.reconcile_index_states")
        start_beat(stack.worker.env["MEMORYHUB_QUEUE"], broker_url=stack.redis.url)

        def all_indexed() -> bool:
            with operator_view():
                return Memory.objects.filter(key__in=saved, index_state="indexed").count() == len(saved)

        wait_for(all_indexed, RECOVERY_SECONDS, "every entry saved during the hang to be indexed")
        indexed_in = time.monotonic() - resumed_at
        # Black-box too: each entry is there through the API, indexed.
        lost = [
            key for key in saved if stack.agent.get(f"memories/{key}/").json().get("index_state") != "indexed"
        ]

    answers = [answer for agent in agents for answer in agent.answers]
    saves = [seconds for kind, _, seconds in answers if kind == "save"]
    reads = [seconds for kind, _, seconds in answers if kind == "read"]
    statuses = sorted({(kind, status) for kind, status, _ in answers})
    assert statuses == [("read", 200), ("save", 201)], statuses
    assert saved and pending_at_resume == len(saved)
    assert lost == []
    record(
        "redis hung (SIGSTOP) under saves and reads",
        hang_seconds=hung_for,
        agents=CLIENTS,
        saves=len(saves),
        reads=len(reads),
        statuses=[f"{kind} {status}" for kind, status in statuses],
        save_ms=percentiles_ms(saves),
        read_ms=percentiles_ms(reads),
        pending_at_resume=pending_at_resume,
        all_indexed_after_resume_seconds=round(indexed_in, 1),
        lost=len(lost),
    )
