"""The load drill: many agents of several teams use one MemoryHub at once, then
every acknowledged write is checked against what the service holds.

Each agent is an asyncio task with a token of its own, doing a realistic mix until the
drill's time or request budget runs out (60% search, 20% save or supersede, 10%
injection, 10% list / get / history), with a short think time between requests. An
agent owns its keys, so the order of its writes to a key is the order they were
acknowledged. Every text carries its team's marker word, and every response body is
checked for another team's marker.

Afterwards, through the API only, for every key an agent wrote: the active entry is the
last acknowledged text, the history holds exactly the acknowledged versions (plus any
whose request failed in flight: such a write may have landed), each version supersedes
the one before it, and no key has two active entries.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import httpx

MIX = (("search", 60), ("save", 20), ("injection", 10), ("read", 10))
WORDS = [
    "deploy",
    "staging",
    "rollback",
    "migration",
    "postgres",
    "replica",
    "cache",
    "redis",
    "worker",
    "queue",
    "latency",
    "incident",
    "runbook",
    "alert",
    "budget",
    "quota",
    "token",
    "rotation",
    "vault",
    "schema",
    "index",
    "vector",
    "keyword",
    "release",
    "freeze",
    "tuesday",
    "review",
    "owner",
    "oncall",
    "backup",
    "restore",
    "drill",
    "metrics",
    "tracing",
]


def marker(slug: str) -> str:
    """The word every text of a team carries, and no other team's response may contain."""
    return f"mk{slug.replace('-', '')}zq"


@dataclass
class AgentPlan:
    team: str
    token: str
    name: str


@dataclass
class Write:
    content: str
    acknowledged: bool  # a 201 came back; otherwise the request failed in flight


@dataclass
class Outcome:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: Counter[tuple[str, str]] = field(default_factory=Counter)
    writes: dict[tuple[str, str], list[Write]] = field(default_factory=lambda: defaultdict(list))
    foreign_reads: list[str] = field(default_factory=list)
    requests: int = 0


def _text(rng: random.Random, team: str, agent: str, n: int) -> str:
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30)))
    return f"{marker(team)} note {n} of {agent}: {words}."


async def _agent(
    client: httpx.AsyncClient,
    plan: AgentPlan,
    markers: dict[str, str],
    outcome: Outcome,
    deadline: float,
    max_requests: int,
    seed: int,
) -> None:
    rng = random.Random(seed)
    base = f"/api/v1/teams/{plan.team}/"
    headers = {"Authorization": f"Bearer {plan.token}"}
    own_keys: list[str] = []
    operations, weights = zip(*MIX, strict=True)
    sent = 0
    while time.monotonic() < deadline and sent < max_requests:
        operation = rng.choices(operations, weights)[0]
        method, path, body = "GET", "", None
        write_key = None
        if operation == "search":
            method, path = "POST", "search/"
            body = {"query": " ".join(rng.sample(WORDS, 3)), "max_results": rng.choice((5, 10, 20))}
        elif operation == "save":
            method, path = "POST", "memories/"
            if own_keys and rng.random() < 0.5:
                write_key = rng.choice(own_keys)
                reason = "the drill's agent learned more"
                body = {"key": write_key, "supersede_reason": reason}
            else:
                write_key = f"{plan.name}-k{len(own_keys)}"
                body = {"key": write_key, "allow_duplicate": True}
            body["content"] = _text(rng, plan.team, plan.name, sent)
        elif operation == "injection":
            path = "injection/"
        else:
            choice = rng.random()
            if own_keys and choice < 0.33:
                path = f"memories/{rng.choice(own_keys)}/"
            elif own_keys and choice < 0.66:
                path = f"memories/{rng.choice(own_keys)}/history/"
            else:
                path = "memories/?limit=20"
        started = time.perf_counter()
        try:
            response = await client.request(method, base + path, json=body, headers=headers)
            status = str(response.status_code)
        except httpx.HTTPError as exc:
            response, status = None, type(exc).__name__
        outcome.latencies[operation].append((time.perf_counter() - started) * 1000)
        outcome.statuses[(operation, status)] += 1
        outcome.requests += 1
        sent += 1
        if write_key is not None and body is not None:
            if status == "201":
                outcome.writes[(plan.team, write_key)].append(Write(body["content"], acknowledged=True))
                if write_key not in own_keys:
                    own_keys.append(write_key)
            elif response is None or response.status_code >= 500:
                outcome.writes[(plan.team, write_key)].append(Write(body["content"], acknowledged=False))
        if response is not None:
            text = response.text
            for slug, word in markers.items():
                if slug != plan.team and word in text:
                    outcome.foreign_reads.append(f"{plan.team} {method} {path} showed {slug}'s data")
        await asyncio.sleep(rng.uniform(0.0, 0.2))


async def _run(
    base_url: str, plans: list[AgentPlan], seconds: float, max_requests: int, seed: int
) -> tuple[Outcome, float]:
    outcome = Outcome()
    markers = {plan.team: marker(plan.team) for plan in plans}
    limits = httpx.Limits(max_connections=len(plans), max_keepalive_connections=len(plans))
    async with httpx.AsyncClient(base_url=base_url, timeout=60, limits=limits) as client:
        began = time.monotonic()
        deadline = began + seconds
        await asyncio.gather(
            *(
                _agent(client, plan, markers, outcome, deadline, max_requests, seed + i)
                for i, plan in enumerate(plans)
            )
        )
        return outcome, time.monotonic() - began


def _get(client: httpx.Client, url: str, token: str) -> Any:
    response = client.get(url, headers={"Authorization": f"Bearer {token}"})
    response.raise_for_status()
    return response.json()


def verify(base_url: str, plans: list[AgentPlan], outcome: Outcome) -> dict[str, Any]:
    """Every acknowledged write against the service's state, through the API."""
    token_of = {plan.team: plan.token for plan in plans}
    lost, broken_chains, wrong_active, duplicate_actives = [], [], [], []
    with httpx.Client(base_url=base_url, timeout=60) as client:
        for (team, key), writes in sorted(outcome.writes.items()):
            token = token_of[team]
            acknowledged = [w.content for w in writes if w.acknowledged]
            in_flight = {w.content for w in writes if not w.acknowledged}
            versions: list[dict[str, Any]] = []
            url: str | None = f"/api/v1/teams/{team}/memories/{key}/history/"
            while url:
                page = _get(client, url, token)
                versions += [e["memory"] for e in page["history"] if e["kind"] in ("created", "hard", "soft")]
                url = page["next"]
            contents = [v["content"] for v in reversed(versions)]  # oldest first
            if [c for c in contents if c not in in_flight] != acknowledged:
                lost.append(f"{team}/{key}: acknowledged {len(acknowledged)}, history holds {len(contents)}")
            for newer, older in itertools.pairwise(versions):
                if newer.get("supersedes_id") != older["id"]:
                    broken_chains.append(f"{team}/{key}")
                    break
            if acknowledged:
                active = client.get(
                    f"/api/v1/teams/{team}/memories/{key}/", headers={"Authorization": f"Bearer {token}"}
                )
                last = acknowledged[-1]
                ok = active.status_code == 200 and (
                    active.json()["content"] == last or active.json()["content"] in in_flight
                )
                if not ok:
                    wrong_active.append(f"{team}/{key}: {active.status_code}")
        for team, token in token_of.items():
            keys: Counter[str] = Counter()
            url = f"/api/v1/teams/{team}/memories/?limit=100"
            while url:
                page = _get(client, url, token)
                keys.update(entry["key"] for entry in page["results"])
                url = page.get("next")
            duplicate_actives += [f"{team}/{key}" for key, n in keys.items() if n > 1]
    return {
        "keys_checked": len(outcome.writes),
        "acknowledged_writes": sum(w.acknowledged for ws in outcome.writes.values() for w in ws),
        "lost_or_altered": lost,
        "broken_chains": broken_chains,
        "wrong_active": wrong_active,
        "duplicate_actives": duplicate_actives,
    }


def summarize(outcome: Outcome, elapsed: float) -> dict[str, Any]:
    from tests.bench.harness import summarize as latency_summary

    by_status: Counter[str] = Counter()
    for (_, status), n in outcome.statuses.items():
        by_status[status] += n
    throttled = by_status.get("429", 0)
    errors = sum(n for status, n in by_status.items() if not status.startswith("2") and status != "429")
    counted = outcome.requests - throttled
    return {
        "requests": outcome.requests,
        "seconds": round(elapsed, 1),
        "throughput_per_s": round(outcome.requests / elapsed, 1) if elapsed else 0.0,
        "latency_ms": {
            op: {"requests": len(values), **latency_summary(values)}
            for op, values in sorted(outcome.latencies.items())
        },
        "statuses": dict(sorted(by_status.items())),
        "by_operation": {f"{op} {status}": n for (op, status), n in sorted(outcome.statuses.items())},
        "throttled_429": throttled,
        "errors": errors,
        "error_rate": round(errors / counted, 5) if counted else 0.0,
        "responses_500": sum(n for status, n in by_status.items() if status.startswith("5")),
        "cross_team_reads": outcome.foreign_reads[:20],
    }


def drive(
    base_url: str, plans: list[AgentPlan], *, seconds: float, max_requests: int, seed: int = 14
) -> tuple[Outcome, float]:
    """Run the agents until the time or each agent's request budget is spent."""
    return asyncio.run(_run(base_url, plans, seconds, max_requests, seed))


def run_load(
    base_url: str, plans: list[AgentPlan], *, seconds: float, max_requests: int, seed: int = 14
) -> dict[str, Any]:
    """Drive the agents, then verify; the drill's figures and findings."""
    outcome, elapsed = drive(base_url, plans, seconds=seconds, max_requests=max_requests, seed=seed)
    report = summarize(outcome, elapsed)
    report["verification"] = verify(base_url, plans, outcome)
    return report


def failures(report: dict[str, Any]) -> list[str]:
    """What makes the drill fail: its targets."""
    found = []
    verification = report["verification"]
    for name in ("lost_or_altered", "broken_chains", "wrong_active", "duplicate_actives"):
        if verification[name]:
            found.append(f"{name}: {verification[name][:5]}")
    if report["cross_team_reads"]:
        found.append(f"cross-team reads: {report['cross_team_reads'][:5]}")
    if report["responses_500"]:
        found.append(f"{report['responses_500']} responses 5xx")
    if report["error_rate"] >= 0.001:
        found.append(f"error rate {report['error_rate']:.4f} (target < 0.001)")
    return found
