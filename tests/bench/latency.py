"""Search latency through the API, next to the raw SQL of the same queries.

Ten teams; the measured team holds SIZE memories and the nine others SIZE / 10 each,
so the team filter has to do real work. Rows are seeded directly (Memory, Chunk,
ChunkEmbedding, bulk-created inside each team's scope, with texts embedded by the local
provider in batches) instead of through the API, which would take hours at 100k. The
texts come from templates and a vocabulary with a fixed seed, so that the full-text and
vector indexes see realistic, varied distributions. The measured team's texts are all
its own; the nine others draw theirs from a shared pool (see NeighbourPool), so that
their vectors are embedded once: embedding is what seeding spends its time on.

A gunicorn server (memoryhub.wsgi, 2 workers) answers `POST /api/v1/teams/{team}/search/`
with {"mode": "hybrid"} and {"mode": "keyword"}; one client sends one request at a
time. In the same run, the bench replays the SQL the selector ran for each query (the
keyword full-text query and the vector HNSW query, captured with CaptureQueriesContext)
straight on a database cursor, so API / SQL shows what the layers above SQL cost.
Hybrid runs at max_results 10 and 50, request by request in turns; the closing table
checks the measures against the search targets, at the largest size measured.

With `--scale`, a second part measures a 1k-memory team alone, then again once the
database holds SCALE_MEMORIES memories over SCALE_TEAMS teams (the filler teams draw
from the shared pool, so their vectors are embedded once): the ratio shows what the
other teams' rows cost a small team.
"""

from __future__ import annotations

import os
import random
import re
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tests.bench import harness

if TYPE_CHECKING:
    from search.retrieval.candidates import SearchMode

SEED = 20250611
TEAMS = 10
SIZES = (10_000, 100_000)
QUERIES = 50
WARMUP_PASSES = 2  # every query this many times before measuring (2 gunicorn workers)
REQUESTS = 200
EMBED_BATCH = 64
EMBED_THREADS = 2
INSERT_BATCH = 2_000
MAX_RESULTS = 10
MAX_RESULTS_WIDE = 50  # hybrid only, measured in turns with MAX_RESULTS
SCALE_TEAM_SIZE = 1_000
SCALE_MEMORIES = 500_000  # defaults of --scale; smaller values only check that it works
SCALE_TEAMS = 50
# One token sends 300 searches a row (warm-up included), faster than the read budget's
# default of 600 a minute allows: the bench measures latency, not the budget.
UNTHROTTLED = {"MEMORYHUB_THROTTLE_READ": "1000000/min"}
# The search targets (set at 100k memories; --quick measures them at 10k).
TARGET_HYBRID_P95_MS = 50.0
TARGET_HYBRID_TO_VECTOR_SQL = 2.0
TARGET_WIDE_TO_NARROW = 2.0
TARGET_KEYWORD_P95_MS = 20.0
TARGET_SCALE_RATIO = 1.2
TARGET_SCALE_MEMORIES = 500_000
TARGET_SCALE_TEAMS = 50
MODES: tuple[SearchMode, ...] = ("hybrid", "keyword")
ROWS: tuple[tuple[SearchMode, tuple[int, ...]], ...] = (
    ("hybrid", (MAX_RESULTS, MAX_RESULTS_WIDE)),
    ("keyword", (MAX_RESULTS,)),
)

# --------------------------------------------------------------------------- texts

PEOPLE = [
    "Alice", "Bongani", "Chen", "Dana", "Eitan", "Farah", "Gustavo", "Hiroko", "Ines", "Jonas",
    "Kemal", "Lena", "Mateo", "Noor", "Oskar", "Priya", "Quentin", "Rosa", "Sven", "Tamar",
]  # fmt: skip
SERVICES = [
    "billing-api", "auth-service", "search-indexer", "payments-gateway", "notification-worker",
    "checkout-web", "inventory-sync", "report-builder", "user-profile", "media-transcoder",
    "feature-flags", "audit-log", "rate-limiter", "email-digest", "export-service", "session-store",
]  # fmt: skip
TECH = [
    "PostgreSQL", "Redis", "Kafka", "Celery", "Django", "React", "Terraform", "Kubernetes", "nginx",
    "gunicorn", "pgvector", "S3", "RabbitMQ", "Elasticsearch", "Grafana", "Prometheus", "Sentry",
    "GitHub Actions", "Docker", "TypeScript", "Go", "Rust", "FastAPI", "SQLite", "ClickHouse",
]  # fmt: skip
CUSTOMERS = [
    "Acme Corp", "Globex", "Initech", "Umbrella Health", "Stark Logistics", "Wayne Retail",
    "Hooli", "Vandelay Imports", "Soylent Foods", "Tyrell Labs", "Cyberdyne", "Wonka Candy",
]  # fmt: skip
ENVIRONMENTS = ["staging", "production", "eu-west-1", "us-east-2", "the canary cluster", "the dev sandbox"]
ISSUES = [
    "connection pool exhaustion", "a memory leak", "a slow query on the orders table", "request timeouts",
    "a deadlock between two migrations", "a race condition in the retry loop", "flaky integration tests",
    "stale cache entries", "duplicate webhook deliveries", "clock skew between nodes",
    "a certificate that expired", "disk filling up with logs", "an N+1 query in the list view",
    "a missing database index", "a breaking change in the client library", "rate limits from the vendor",
]  # fmt: skip
REASONS = [
    "it halves the p95 latency", "the team already knows it", "it is cheaper to run",
    "the old setup could not scale past one node", "it removes a moving part",
    "the vendor dropped support for the old version", "it makes local development simpler",
    "compliance asked for encryption at rest", "on-call load was too high",
]  # fmt: skip
ACTIONS = [
    "deploy database migrations", "rotate API keys", "upgrade the ORM", "change the retry policy",
    "merge without a review", "resize the cluster", "truncate the audit table", "bump the base image",
    "disable the circuit breaker", "run the backfill job",
]  # fmt: skip
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "the weekend", "a release day"]
ROLES = ["code review", "deployment", "incident response", "release notes", "test triage", "support"]
STYLES = ["small pull requests", "type hints everywhere", "tests before fixes", "short commit messages"]
FILLERS = [
    "Metrics showed p95 latency of {n} ms on {host}.",
    "The fix was merged in PR #{pr}.",
    "Follow up with {person} next {day}.",
    "See incident {ticket} for the timeline.",
    "The config flag is {flag}.",
    "Error code {code} shows up in the logs when it happens.",
    "It affected about {pct}% of requests from {customer}.",
    "{person} wrote the postmortem.",
    "Rollback took {mins} minutes.",
    "The dashboard panel is called {panel}.",
]
TEMPLATES = {
    "decision": [
        "We decided to use {tech} for {service} instead of {tech2} because {reason}. "
        "{person} owns the migration, tracked in {ticket}.",
        "Decision: {service} moves to {tech} in {env}; {reason}. Agreed with {person} and {person2}.",
    ],
    "lesson": [
        "Never {action} on {day}: last time it caused {issue} in {env} and took {mins} minutes to recover.",
        "Lesson: when {service} shows {issue}, check {host} first; restarting {tech} only hides it.",
    ],
    "context": [
        "{person} is working on {service} for {customer}; the current blocker is {issue} on {host}.",
        "{customer} reported {issue} in {service} after the {tech} upgrade; {person} is investigating.",
        "Sprint goal: ship the {feature} feature of {service} for {customer} before {day}.",
    ],
    "reference": [
        "The runbook for {service} lives at https://wiki.example.com/runbooks/{slug}; ask {person} for access.",
        "{tech} settings for {service} are documented in docs/{slug}.md, section {section}.",
    ],
    "identity": [
        "I am the {role} agent of the {team_name} team; I report to {person} and never touch {service} in {env}.",
    ],
    "historical": [
        "In {year} {service} ran on {tech}; it was replaced by {tech2} after {issue}.",
        "Previously {person} owned {service}; since {year} {person2} does.",
    ],
    "preference": [
        "{person} prefers {style} in code reviews of {service} and dislikes surprise {tech} upgrades.",
    ],
}
TYPE_OF_TEMPLATE = {"preference": "context"}
FEATURES = ["bulk export", "dark mode", "SSO login", "usage alerts", "audit trail", "webhooks", "CSV import"]


SYLLABLES = ["ka", "zu", "mor", "vex", "tri", "lo", "quin", "dra", "pel", "xo", "sar", "bim", "gru", "nef"]


def _rare_word(rng: random.Random) -> str:
    """A made-up, pronounceable word: a keyword the full-text index has seen only a few times."""
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(3, 4)))


class TextGenerator:
    """Deterministic, varied memory texts. `team_seed` gives each team its own stream."""

    def __init__(self, team_seed: int) -> None:
        self.rng = random.Random(SEED * 1_000 + team_seed)

    def _fields(self) -> dict[str, Any]:
        rng = self.rng
        person, person2 = rng.sample(PEOPLE, 2)
        tech, tech2 = rng.sample(TECH, 2)
        return {
            "person": person,
            "person2": person2,
            "tech": tech,
            "tech2": tech2,
            "service": rng.choice(SERVICES),
            "customer": rng.choice(CUSTOMERS),
            "env": rng.choice(ENVIRONMENTS),
            "issue": rng.choice(ISSUES),
            "reason": rng.choice(REASONS),
            "action": rng.choice(ACTIONS),
            "day": rng.choice(DAYS),
            "role": rng.choice(ROLES),
            "style": rng.choice(STYLES),
            "feature": rng.choice(FEATURES),
            "team_name": rng.choice(["platform", "payments", "growth", "data", "mobile"]),
            "host": f"{rng.choice(['db', 'api', 'worker', 'cache', 'queue'])}-{rng.choice(['eu', 'us', 'ap'])}-"
            f"{rng.randint(1, 60)}",
            "ticket": f"{rng.choice(['INC', 'OPS', 'BUG', 'SEC'])}-{rng.randint(1000, 99999)}",
            "pr": rng.randint(100, 20000),
            "n": rng.randint(40, 4000),
            "pct": rng.randint(1, 60),
            "mins": rng.randint(3, 240),
            "year": rng.randint(2015, 2024),
            "code": f"E{rng.randint(1000, 9999)}",
            "flag": f"{rng.choice(SERVICES).replace('-', '_')}.{_rare_word(rng)}_enabled",
            "panel": f"{_rare_word(rng)} overview",
            "slug": f"{rng.choice(SERVICES)}-{_rare_word(rng)}",
            "section": rng.randint(1, 12),
        }

    def memory(self) -> tuple[str, str]:
        """(type, content)."""
        rng = self.rng
        kind = rng.choice(list(TEMPLATES))
        fields = self._fields()
        sentences = [rng.choice(TEMPLATES[kind]).format(**fields)]
        for _ in range(rng.choices([0, 1, 2, 3, 5], weights=[25, 35, 22, 12, 6])[0]):
            sentences.append(rng.choice(FILLERS).format(**self._fields() | {"person": fields["person"]}))
        return TYPE_OF_TEMPLATE.get(kind, kind), " ".join(sentences)


def memory_texts(team_seed: int, count: int) -> Iterator[tuple[str, str]]:
    generator = TextGenerator(team_seed)
    for _ in range(count):
        yield generator.memory()


PARAPHRASES = [
    "why did we pick {tech} for {service}",
    "what went wrong the last time someone had to {action}",
    "who is looking into the {issue} problem for {customer}",
    "where can I find the operations guide for {service}",
    "which database did {service} use in the past",
    "is it safe to {action} before the weekend",
    "what does {person} like to see in a code review",
    "customer complaints about {service} being slow after an upgrade",
    "how do we fix {issue} in {env}",
    "what is the plan for the {feature} work",
]


RARE_PATTERNS = (
    re.compile(r"\b(?:INC|OPS|BUG|SEC)-\d+\b"),  # ticket ids
    re.compile(r"\bE\d{4}\b"),  # error codes
    re.compile(r"\b([a-z]{6,16}) overview\b"),  # made-up words in panel names...
    re.compile(r"\.([a-z]{6,16})_enabled\b"),  # ...and in config flags
)


def build_queries(sample_texts: list[str]) -> list[dict[str, str]]:
    """25 paraphrase-like questions and 25 rare-keyword queries (ticket ids, error codes,
    made-up words), fixed by the seed. Rare keywords come from texts the measured team
    holds at every size."""
    rng = random.Random(SEED)
    queries = []
    for _ in range(QUERIES // 2):
        fields = TextGenerator(rng.randint(0, 10**6))._fields()
        queries.append({"kind": "paraphrase", "query": rng.choice(PARAPHRASES).format(**fields)})
    found: list[list[str]] = [[] for _ in RARE_PATTERNS]
    for text in sample_texts:
        for i, pattern in enumerate(RARE_PATTERNS):
            for match in pattern.finditer(text):
                word = match.group(match.lastindex or 0)
                if word not in found[i]:
                    found[i].append(word)
    words = [*rng.sample(found[0], 7), *rng.sample(found[1], 6), *rng.sample(found[2] + found[3], 12)]
    queries.extend({"kind": "rare keyword", "query": word} for word in words)
    return queries


# --------------------------------------------------------------------------- seeding


@dataclass
class SeedTeam:
    index: int
    slug: str
    team: Any
    token: str
    count: int = 0
    used_pool: set[int] = field(default_factory=set)


class NeighbourPool:
    """Texts of the nine other teams: each draws its memories from one shared pool twice
    as large as a team's share, so every pool text sits in about 4.5 teams and is
    embedded once. The measured team's own texts are all its own (a separate stream)."""

    def __init__(self) -> None:
        self.generator = TextGenerator(team_seed=999)
        self.rows: list[tuple[str, str]] = []

    def grow_to(self, n: int) -> None:
        while len(self.rows) < n:
            self.rows.append(self.generator.memory())

    def draw(self, seed_team: SeedTeam, n: int) -> list[tuple[str, str]]:
        """n pool texts this team does not hold yet (raises if the pool is too small)."""
        rng = random.Random(SEED + seed_team.index * 7919 + len(seed_team.used_pool))
        free = [i for i in range(len(self.rows)) if i not in seed_team.used_pool]
        picked = rng.sample(free, n)
        seed_team.used_pool.update(picked)
        return [self.rows[i] for i in picked]


def _setup_teams(count: int = TEAMS) -> list[SeedTeam]:
    from teams.services import create_team, create_token

    teams = []
    for i in range(count):
        slug = f"bench-team-{i:02d}"
        team = create_team(slug=slug, name=f"Bench team {i}")
        token = create_token(team=team, name="bench", scopes=["read"], actor="test").raw
        teams.append(SeedTeam(index=i, slug=slug, team=team, token=token))
    return teams


class _Embedder:
    """The local provider, two threads at a time (onnxruntime releases the GIL; the
    machine has 2 cores), with a cache by content hash so a text is embedded once."""

    def __init__(self) -> None:
        from search.embeddings.profiles import provider_for

        provider = provider_for("local")
        if provider is None:
            raise RuntimeError("the 'local' embedding profile has no provider")
        self.provider = provider
        self.cache: dict[str, Any] = {}
        self.embedded = 0
        self.seconds = 0.0
        self.loaded_from_disk = self._load()

    @property
    def _disk_path(self) -> Any:
        # Seeding texts are deterministic (fixed seeds): their vectors are kept between
        # runs, so only the first run on a machine pays for embedding ~120k texts.
        return harness.DATA_DIR / f"seed-vectors-{self.provider.model}.npz"

    def _load(self) -> int:
        import numpy as np

        if not self._disk_path.exists():
            return 0
        with np.load(self._disk_path) as stored:
            self.cache = dict(zip(stored["hashes"].tolist(), stored["vectors"], strict=True))
        return len(self.cache)

    def save(self) -> None:
        import numpy as np

        if self.cache:
            hashes = np.array(list(self.cache))
            vectors = np.stack(list(self.cache.values())).astype(np.float32)
            np.savez(self._disk_path, hashes=hashes, vectors=vectors)

    def embed(self, items: list[tuple[str, str]]) -> list[Any]:
        """Vectors (float32 arrays) for (content_hash, text) pairs, in order."""
        from concurrent.futures import ThreadPoolExecutor

        import numpy as np

        missing = dict((h, t) for h, t in items if h not in self.cache)
        hashes = list(missing)
        batches = [hashes[i : i + EMBED_BATCH] for i in range(0, len(hashes), EMBED_BATCH)]
        began = time.perf_counter()
        with ThreadPoolExecutor(EMBED_THREADS) as pool:
            results = pool.map(
                lambda batch: self.provider.embed_documents([missing[h] for h in batch]), batches
            )
            for batch, vectors in zip(batches, results, strict=True):
                for h, vector in zip(batch, vectors, strict=True):
                    self.cache[h] = np.asarray(vector, dtype=np.float32)
        self.seconds += time.perf_counter() - began
        self.embedded += len(hashes)
        return [self.cache[h] for h, _ in items]


def _insert(seed_team: SeedTeam, rows: list[tuple[str, str]], embedder: _Embedder) -> int:
    """Bulk-create memories, their chunks (the real chunker) and chunk embeddings."""
    from memories.models import IndexState, Memory
    from search.chunking import chunk_text
    from search.models import Chunk, ChunkEmbedding
    from teams.scope import team_scope

    team = seed_team.team
    memories = []
    pieces = []
    for memory_type, content in rows:
        seed_team.count += 1
        memories.append(
            Memory(
                team=team,
                key=f"mem-{seed_team.count:06d}",
                content=content,
                type=memory_type,
                updated_by="bench-seed",
                content_hash=Memory.hash_content(content),
                index_state=IndexState.INDEXED,
            )
        )
        pieces.append(chunk_text(content))
    vectors = embedder.embed([(p.content_hash, p.text) for chunks in pieces for p in chunks])
    with team_scope(team.id):
        Memory.objects.bulk_create(memories)
        chunks = Chunk.objects.bulk_create(
            [
                Chunk(
                    team=team,
                    memory=memory,
                    chunk_index=p.index,
                    text=p.text,
                    token_count=p.token_count,
                    content_hash=p.content_hash,
                )
                for memory, chunk_list in zip(memories, pieces, strict=True)
                for p in chunk_list
            ]
        )
        ChunkEmbedding.objects.bulk_create(
            [
                ChunkEmbedding(team=team, chunk=chunk, model=embedder.provider.model, embedding=vector)
                for chunk, vector in zip(chunks, vectors, strict=True)
            ]
        )
    return len(chunks)


def _seed_to(
    teams: list[SeedTeam], size: int, embedder: _Embedder, own: TextGenerator, pool: NeighbourPool
) -> dict[str, Any]:
    """Grow the measured team (teams[0]) to `size` memories and the others to size / 10."""
    pool.grow_to(2 * (size // 10))
    targets = {t.index: size if t.index == 0 else size // 10 for t in teams}
    return _seed(teams, targets, embedder, own, pool, label=f"seeding {size:,}")


def _seed(
    teams: list[SeedTeam],
    targets: dict[int, int],
    embedder: _Embedder,
    own: TextGenerator,
    pool: NeighbourPool,
    *,
    label: str,
    maintenance_work_mem: str = "1GB",
) -> dict[str, Any]:
    """Grow each team to targets[its index] memories (teams[0] writes its own texts, the
    others draw from the pool; teams not in `targets` stay as they are), with the model's
    HNSW index dropped during the inserts and rebuilt after."""
    from django.db import connection
    from tqdm import tqdm

    from search import vector_index
    from teams.roles import as_owner

    targets = {t.index: max(t.count, targets.get(t.index, t.count)) for t in teams}
    total = sum(targets[t.index] - t.count for t in teams)
    model, dims = embedder.provider.model, embedder.provider.dimensions
    began = time.perf_counter()
    embedded_before, embed_seconds_before = embedder.embedded, embedder.seconds
    chunks = 0
    # Indexes belong to the owner role, as migrations create them.
    with as_owner(connection), connection.cursor() as cursor:
        cursor.execute(vector_index.drop_index_sql(model))
    with tqdm(total=total, desc=label, unit="mem", smoothing=0.05) as bar:
        for seed_team in teams:
            while seed_team.count < targets[seed_team.index]:
                n = min(INSERT_BATCH, targets[seed_team.index] - seed_team.count)
                # The measured team writes its own texts; the others draw from the pool.
                rows = [own.memory() for _ in range(n)] if seed_team.index == 0 else pool.draw(seed_team, n)
                chunks += _insert(seed_team, rows, embedder)
                bar.update(n)
    insert_seconds = time.perf_counter() - began

    began = time.perf_counter()
    with as_owner(connection), connection.cursor() as cursor:
        # The migration's own statement; a larger maintenance_work_mem only keeps the
        # graph build in memory, which pgvector needs to build it fast.
        cursor.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
        cursor.execute(vector_index.create_index_sql(model, dims))
        cursor.execute("RESET maintenance_work_mem")
    index_seconds = time.perf_counter() - began
    began = time.perf_counter()
    with as_owner(connection), connection.cursor() as cursor:
        for table in ("memories_memory", "search_chunk", "search_chunkembedding"):
            cursor.execute(f"VACUUM ANALYZE {table}")
    vacuum_seconds = time.perf_counter() - began
    return {
        "memories_added": total,
        "chunks_added": chunks,
        "texts_embedded": embedder.embedded - embedded_before,
        "embed_seconds": round(embedder.seconds - embed_seconds_before, 1),
        "insert_seconds_including_embedding": round(insert_seconds, 1),
        "hnsw_build_seconds": round(index_seconds, 1),
        "vacuum_analyze_seconds": round(vacuum_seconds, 1),
        "total_seconds": round(insert_seconds + index_seconds + vacuum_seconds, 1),
        "memories_per_team": {t.slug: t.count for t in teams},
    }


# --------------------------------------------------------------------------- measuring


def _capture(
    seed_team: SeedTeam, queries: list[dict[str, str]], mode: SearchMode, max_results: int
) -> list[dict[str, Any]]:
    """Run the selector once per query in-process and keep the SQL it ran."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from search.run_search import embed_and_search
    from teams.scope import team_scope

    captured = []
    for q in queries:
        with CaptureQueriesContext(connection) as ctx, team_scope(seed_team.team.id):
            embed_and_search(team=seed_team.team, query=q["query"], max_results=max_results, mode=mode)
        statements = [s["sql"] for s in ctx.captured_queries]
        # The follow-up queries that complete the scores of candidates found by the
        # other path are limited to a list of memory ids; the two main ones are not.
        # The keyword path: the lookup of the query's lexemes in the team's statistics,
        # then BM25 over the bounded candidates (search.retrieval.candidates).
        keyword = [
            s
            for s in statements
            if ("FROM search_keywordstat" in s or "search_keyword_candidates(" in s)
            and "memory_id = ANY" not in s
        ]
        vector = [s for s in statements if "<=>" in s and "memory_id = ANY" not in s]
        # The replay is only honest if it finds the selector's statements: fail loudly
        # when the selector's SQL no longer looks the way this capture expects.
        if not keyword or (mode == "hybrid" and not vector):
            raise RuntimeError(
                f"could not find the {mode} search's keyword/vector statements among the "
                f"{len(statements)} captured for {q['query']!r}; update latency._capture"
            )
        captured.append(
            {
                "keyword": keyword,
                "vector": vector[0] if vector else None,
                "vector_path": None if not vector else ("hnsw" if "::vector(" in vector[0] else "exact scan"),
                "vector_settings": [s for s in statements if "set_config('hnsw." in s],
                "all": [
                    s for s in statements if not s.upper().startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))
                ],
            }
        )
    return captured


def _time_sql(seed_team: SeedTeam, statements: list[str], prelude: list[str]) -> float:
    """Milliseconds to execute and fetch `statements` in one transaction of the team's scope
    (the `prelude`, e.g. the selector's SET LOCALs, runs first and is not timed)."""
    from django.db import connection

    from teams.scope import team_scope

    with team_scope(seed_team.team.id), connection.cursor() as cursor:
        for s in prelude:
            cursor.execute(s)
        began = time.perf_counter()
        for s in statements:
            cursor.execute(s)
            if cursor.description is not None:
                cursor.fetchall()
        return (time.perf_counter() - began) * 1000


class _Samples(dict[str, list[float]]):
    def add(self, name: str, ms: float) -> None:
        self.setdefault(name, []).append(ms)


@dataclass
class _Row:
    """One row of the table: a mode at one max_results, with what its requests gathered."""

    mode: SearchMode
    max_results: int
    captured: list[dict[str, Any]]
    samples: _Samples = field(default_factory=_Samples)
    modes: dict[str, int] = field(default_factory=dict)
    empty: int = 0


def _measure(
    base: str,
    seed_team: SeedTeam,
    queries: list[dict[str, str]],
    mode: SearchMode,
    max_results: tuple[int, ...],
) -> list[dict[str, Any]]:
    """One result per max_results. For each request: the search through the API, the
    selector in this process, the query embedding alone (hybrid), and the replay of the
    selector's SQL for the same query, one after the other, so that all of them see the
    same machine at the same moment (the machine is shared; the ratios stay fair when its
    load changes). The max_results values take turns on every query, in alternating order,
    so that neither always finds the caches warmed by the other."""
    import httpx

    from search.embeddings.profiles import provider_for
    from search.run_search import embed_and_search
    from teams.scope import team_scope

    load_before = os.getloadavg()[0]
    began = time.perf_counter()
    team = seed_team.team
    provider = provider_for("local")
    rows = [_Row(mode, n, _capture(seed_team, queries, mode, n)) for n in max_results]
    url = f"{base}/api/v1/teams/{seed_team.slug}/search/"

    with httpx.Client(headers={"Authorization": f"Bearer {seed_team.token}"}, timeout=120) as client:

        def one(row: _Row, i: int) -> None:
            q, c, samples = queries[i], row.captured[i], row.samples
            began = time.perf_counter()
            response = client.post(
                url, json={"query": q["query"], "max_results": row.max_results, "mode": mode}
            )
            samples.add("api", (time.perf_counter() - began) * 1000)
            samples.add(f"api {q['kind']}", samples["api"][-1])
            if response.status_code != 200:
                raise RuntimeError(f"search answered {response.status_code}: {response.text[:300]}")
            body = response.json()
            row.modes[body["search_mode"]] = row.modes.get(body["search_mode"], 0) + 1
            row.empty += not body["results"]

            began = time.perf_counter()
            with team_scope(team.id):
                embed_and_search(team=team, query=q["query"], max_results=row.max_results, mode=mode)
            samples.add("selector", (time.perf_counter() - began) * 1000)
            if mode == "hybrid" and provider is not None:
                began = time.perf_counter()
                provider.embed_query(q["query"])
                samples.add("embedding", (time.perf_counter() - began) * 1000)

            keyword = _time_sql(seed_team, c["keyword"], [])
            samples.add("keyword sql", keyword)
            if c["vector"]:
                vector = _time_sql(seed_team, [c["vector"]], c["vector_settings"])
                samples.add("vector sql", vector)
                samples.add("main sql", keyword + vector)
            else:
                samples.add("main sql", keyword)
            samples.add("all sql", _time_sql(seed_team, c["all"], []))

        # Warm-up: every query through everything, twice (two gunicorn workers load the
        # model and fill their caches), then the measured requests.
        for request in range(WARMUP_PASSES * len(queries) + REQUESTS):
            if request == WARMUP_PASSES * len(queries):
                for row in rows:
                    row.samples, row.modes, row.empty = _Samples(), {}, 0
            for row in rows if request % 2 == 0 else rows[::-1]:
                one(row, request % len(queries))

    context = {
        "seconds": round(time.perf_counter() - began, 1),
        "load_average_1min": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
    }
    return [_summary(row) | context for row in rows]


def _summary(row: _Row) -> dict[str, Any]:
    figures = {name: harness.summarize(ms) for name, ms in row.samples.items()}
    return {
        "mode": row.mode,
        "max_results": row.max_results,
        "api_ms": figures["api"],
        "api_ms_by_query_kind": {
            k.removeprefix("api "): v for k, v in figures.items() if k.startswith("api ")
        },
        "api_search_mode_returned": row.modes,
        "api_empty_results": row.empty,
        "selector_in_process_ms": figures["selector"],
        "query_embedding_ms": figures.get("embedding"),
        "keyword_sql_ms": figures["keyword sql"],
        "vector_sql_ms": figures.get("vector sql"),
        "main_sql_ms": figures["main sql"],
        "all_selector_sql_ms": figures["all sql"],
        "statements_per_search": statistics.median(len(c["all"]) for c in row.captured),
        "vector_path": sorted({c["vector_path"] for c in row.captured if c["vector_path"]}),
        "ratio_api_to_main_sql_p50": round(figures["api"]["p50"] / figures["main sql"]["p50"], 2),
        "ratio_api_to_main_sql_p95": round(figures["api"]["p95"] / figures["main sql"]["p95"], 2),
    }


def _print_seeding(what: str, report: dict[str, Any]) -> None:
    print(
        f"{what}: +{report['memories_added']:,} memories in {report['total_seconds']:.0f} s "
        f"({report['texts_embedded']:,} distinct texts embedded in {report['embed_seconds']:.0f} s; "
        f"inserts incl. embedding {report['insert_seconds_including_embedding']:.0f} s, "
        f"HNSW build {report['hnsw_build_seconds']:.0f} s, VACUUM ANALYZE {report['vacuum_analyze_seconds']:.0f} s)"
    )


def _run_scale(embedder: _Embedder, memories: int, team_count: int) -> dict[str, Any]:
    """A SCALE_TEAM_SIZE team measured alone, then again once the database holds at least
    `memories` memories over `team_count` teams (the measured one included)."""
    filler = -(-(memories - SCALE_TEAM_SIZE) // (team_count - 1))
    total = SCALE_TEAM_SIZE + filler * (team_count - 1)
    print(
        f"\n== latency --scale: a {SCALE_TEAM_SIZE:,}-memory team alone, then among {total:,} memories "
        f"over {team_count} teams =="
    )
    harness.reset_data()
    teams = _setup_teams(team_count)
    measured = teams[0]
    own, pool = TextGenerator(team_seed=0), NeighbourPool()
    queries = build_queries([text for _, text in memory_texts(0, SCALE_TEAM_SIZE)])
    seeding, results = [], []
    with harness.api_server(workers=2, **UNTHROTTLED) as base:
        report = _seed(teams, {0: SCALE_TEAM_SIZE}, embedder, own, pool, label="seeding the team alone")
        seeding.append(report | {"phase": "alone"})
        _print_seeding("seeded the team alone", report)
        for mode in MODES:
            print(f"  measuring {mode}, the team alone ...", flush=True)
            for r in _measure(base, measured, queries, mode, (MAX_RESULTS,)):
                results.append(r | {"phase": "alone", "memories_in_database": SCALE_TEAM_SIZE, "teams": 1})

        pool.grow_to(2 * filler)
        report = _seed(
            teams,
            {t.index: filler for t in teams[1:]},
            embedder,
            own,
            pool,
            label=f"seeding {team_count - 1} other teams",
            # An HNSW graph takes about 2 kB a vector: 500k of them outgrow 1GB, and a graph
            # built on disk takes far longer.
            maintenance_work_mem="4GB",
        )
        embedder.save()
        seeding.append(report | {"phase": "full"})
        _print_seeding(f"seeded {team_count - 1} other teams", report)
        for mode in MODES:
            print(f"  measuring {mode}, the team among {total:,} memories ...", flush=True)
            for r in _measure(base, measured, queries, mode, (MAX_RESULTS,)):
                results.append(r | {"phase": "full", "memories_in_database": total, "teams": team_count})

    ratios = {}
    for mode in MODES:
        alone, full = (
            next(r for r in results if (r["phase"], r["mode"]) == (p, mode)) for p in ("alone", "full")
        )
        ratios[mode] = round(full["api_ms"]["p95"] / alone["api_ms"]["p95"], 2)
    headers = ["phase", "memories in database", "teams", "mode", "API p50", "API p95", "SQL p50", "SQL p95"]
    rows = [
        [
            r["phase"],
            f"{r['memories_in_database']:,}",
            str(r["teams"]),
            r["mode"],
            f"{r['api_ms']['p50']:.1f}",
            f"{r['api_ms']['p95']:.1f}",
            f"{r['main_sql_ms']['p50']:.1f}",
            f"{r['main_sql_ms']['p95']:.1f}",
        ]
        for r in results
    ]
    print()
    harness.print_table(headers, rows)
    print(
        f"milliseconds; the same {SCALE_TEAM_SIZE:,}-memory team and {len(queries)} queries in both phases, "
        f"max_results={MAX_RESULTS}, {REQUESTS} requests per row after {WARMUP_PASSES} warm-up passes; "
        "API p95 full / alone: " + ", ".join(f"{mode} {ratio:.2f}x" for mode, ratio in ratios.items())
    )
    # The two phases cannot take turns: a change of the machine's load between them shows here.
    loads = "; ".join(
        f"{r['phase']} {r['mode']} {r['load_average_1min']['before']} -> {r['load_average_1min']['after']}"
        for r in results
    )
    print(f"1-minute load average before -> after each row ({os.cpu_count()} CPUs): {loads}")
    return {
        "team_size": SCALE_TEAM_SIZE,
        "memories_in_database": total,
        "teams": team_count,
        "memories_per_other_team": filler,
        "how": "the measured team's texts are its own (the first texts of the main part's measured team); "
        f"the {team_count - 1} others draw {filler:,} each from a shared pool of {2 * filler:,} texts, "
        "embedded once; the team is measured alone first (the only team), then after the others are seeded",
        "queries": queries,
        "seeding": seeding,
        "results": results,
        "ratio_full_to_alone_api_p95": ratios,
    }


def _target(measure: str, value: float, target: float, unit: str) -> dict[str, Any]:
    return {
        "measure": measure,
        "value": round(value, 2),
        "unit": unit,
        "target": target,
        "met": round(value, 2) <= target,
    }


def _targets(results: list[dict[str, Any]], scale: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The search targets, at the largest size measured (and --scale's, if run)."""
    size = max(r["size"] for r in results)
    at = {(r["mode"], r["max_results"]): r for r in results if r["size"] == size}
    hybrid = at["hybrid", MAX_RESULTS]["api_ms"]["p95"]
    wide = at["hybrid", MAX_RESULTS_WIDE]["api_ms"]["p95"]
    keyword = at["keyword", MAX_RESULTS]["api_ms"]["p95"]
    vector_sql = at["hybrid", MAX_RESULTS]["vector_sql_ms"]["p95"]
    where = f"{size:,} memories in one team of {TEAMS}"
    targets = [
        _target(f"API hybrid p95, max_results {MAX_RESULTS}, {where}", hybrid, TARGET_HYBRID_P95_MS, "ms"),
        _target(
            f"API hybrid p95 / raw vector top-k SQL p95, max_results {MAX_RESULTS} ({hybrid:.1f} / {vector_sql:.1f} ms)",
            hybrid / vector_sql,
            TARGET_HYBRID_TO_VECTOR_SQL,
            "x",
        ),
        _target(
            f"API hybrid p95, max_results {MAX_RESULTS_WIDE} / max_results {MAX_RESULTS} ({wide:.1f} / {hybrid:.1f} ms)",
            wide / hybrid,
            TARGET_WIDE_TO_NARROW,
            "x",
        ),
        _target(
            f"API keyword-only p95, max_results {MAX_RESULTS}, {where}", keyword, TARGET_KEYWORD_P95_MS, "ms"
        ),
    ]
    if scale is not None:
        full_size = (
            scale["memories_in_database"] >= TARGET_SCALE_MEMORIES and scale["teams"] >= TARGET_SCALE_TEAMS
        )
        for mode, ratio in scale["ratio_full_to_alone_api_p95"].items():
            row = _target(
                f"API {mode} p95 of a {scale['team_size']:,}-memory team among {scale['memories_in_database']:,} "
                f"memories over {scale['teams']} teams / alone"
                + ("" if full_size else " (a check run: the target is for 500k over 50)"),
                ratio,
                TARGET_SCALE_RATIO,
                "x",
            )
            targets.append(row | {"at_target_size": full_size})
    return targets


def run(*, quick: bool = False, scale: tuple[int, int] | None = None) -> dict[str, Any]:
    """`scale`: (memories, teams) for the --scale part, or None to skip it."""
    sizes = SIZES[:1] if quick else SIZES
    print(f"\n== latency: search through the API at {', '.join(f'{s:,}' for s in sizes)} memories ==")
    harness.reset_data()
    teams = _setup_teams()
    embedder = _Embedder()
    if embedder.loaded_from_disk:
        print(
            f"{embedder.loaded_from_disk:,} seeding vectors reused from an earlier run ({embedder._disk_path.name})"
        )
    measured = teams[0]
    own, pool = TextGenerator(team_seed=0), NeighbourPool()
    # Rare keywords must exist at every size: take them from the first 2,000 texts the
    # measured team will hold (the generator is deterministic).
    queries = build_queries([text for _, text in memory_texts(0, 2_000)])

    seeding = []
    results: list[dict[str, Any]] = []
    with harness.api_server(workers=2, **UNTHROTTLED) as base:
        for size in sizes:
            report = _seed_to(teams, size, embedder, own, pool)
            report["size"] = size
            seeding.append(report)
            embedder.save()
            _print_seeding(f"seeded to {size:,}", report)
            for mode, max_results in ROWS:
                print(
                    f"  measuring {mode} at {size:,}, max_results {' and '.join(map(str, max_results))} ...",
                    flush=True,
                )
                results.extend(
                    r | {"size": size} for r in _measure(base, measured, queries, mode, max_results)
                )

    headers = [
        "size", "mode", "max", "API p50", "API p95", "selector p50", "embed p50", "SQL p50", "SQL p95",
        "vector SQL p95", "all SQL p50", "API/SQL p50", "API/SQL p95",
    ]  # fmt: skip
    rows = []
    for r in results:
        rows.append(
            [
                f"{r['size']:,}",
                r["mode"],
                str(r["max_results"]),
                f"{r['api_ms']['p50']:.1f}",
                f"{r['api_ms']['p95']:.1f}",
                f"{r['selector_in_process_ms']['p50']:.1f}",
                f"{r['query_embedding_ms']['p50']:.1f}" if r["query_embedding_ms"] else "-",
                f"{r['main_sql_ms']['p50']:.1f}",
                f"{r['main_sql_ms']['p95']:.1f}",
                f"{r['vector_sql_ms']['p95']:.1f}" if r["vector_sql_ms"] else "-",
                f"{r['all_selector_sql_ms']['p50']:.1f}",
                f"{r['ratio_api_to_main_sql_p50']:.2f}x",
                f"{r['ratio_api_to_main_sql_p95']:.2f}x",
            ]
        )
    print()
    harness.print_table(headers, rows)
    print(
        f"milliseconds; {REQUESTS} sequential requests per row ({len(queries)} queries: half paraphrase-like, "
        f"half rare-keyword) after {WARMUP_PASSES} warm-up passes over every query; hybrid's two max_results "
        "rows take turns on every query.\n"
        "API = POST /search/ to gunicorn (2 workers) over HTTP, one client, body {query, max_results, mode}.\n"
        "selector = embed_and_search (query embedding + selector) in the bench process. embed = the query embedding alone.\n"
        "SQL = the selector's keyword full-text query (+ its vector query, for hybrid), captured once per query "
        "and replayed on a cursor; vector SQL = the vector top-k query alone; all SQL = every statement one "
        "search runs, replayed.\n"
        "Each request runs API, selector, embedding and SQL back to back for the same query."
    )
    for r in results:
        kinds = ", ".join(
            f"{kind} {ms['p50']:.1f} / {ms['p95']:.1f}" for kind, ms in r["api_ms_by_query_kind"].items()
        )
        print(f"API p50 / p95 by query kind at {r['size']:,} {r['mode']} {r['max_results']}: {kinds}")
    for r in results:
        if set(r["api_search_mode_returned"]) != {r["mode"]}:
            print(f"warning: asked for {r['mode']} at {r['size']:,}, got {r['api_search_mode_returned']}")
        if r["vector_path"]:
            print(
                f"vector path at {r['size']:,} ({r['mode']} {r['max_results']}): {', '.join(r['vector_path'])}"
            )
    # The bench itself keeps about one core busy (client, server, PostgreSQL in turn);
    # a higher load means something else shared the machine.
    loads = "; ".join(
        f"{r['size']:,} {r['mode']} {r['max_results']} {r['load_average_1min']['before']} -> "
        f"{r['load_average_1min']['after']}"
        for r in results
    )
    print(f"1-minute load average before -> after each row ({os.cpu_count()} CPUs): {loads}")

    scale_part = _run_scale(embedder, *scale) if scale is not None else None
    targets = _targets(results, scale_part)
    size = max(sizes)
    print(
        f"\nsearch targets at {size:,} memories"
        + (" (--quick: the targets are set at 100,000; run without --quick for them)" if quick else "")
    )
    harness.print_table(
        ["measure", "measured", "target", "result"],
        [
            [
                t["measure"],
                f"{t['value']:.1f} ms" if t["unit"] == "ms" else f"{t['value']:.2f}x",
                f"<= {t['target']:.0f} ms" if t["unit"] == "ms" else f"<= {t['target']:.1f}x",
                "met" if t["met"] else "missed",
            ]
            for t in targets
        ],
    )

    return {
        "section": "latency",
        "quick": quick,
        "how": {
            "teams": f"{TEAMS} teams; the measured team holds SIZE memories, the 9 others SIZE/10 each",
            "seeding": "Memory, Chunk (search.chunking.chunk_text) and ChunkEmbedding rows bulk-created in each "
            f"team's scope; texts embedded with provider_for('local') in batches of {EMBED_BATCH} on "
            f"{EMBED_THREADS} threads, each distinct text once; HNSW index dropped during the inserts and "
            "rebuilt with the migration's statement; VACUUM ANALYZE after",
            "texts": f"templates + vocabulary, random seed {SEED}; the measured team's texts are its own, the "
            "9 others draw from a shared pool of 2 x SIZE/10 texts (each pool text in about 4.5 teams)",
            "queries": queries,
            "api": f"gunicorn memoryhub.wsgi, 2 workers, 127.0.0.1; httpx, sequential; {WARMUP_PASSES} warm-up "
            f"passes over the {len(queries)} queries, then {REQUESTS} measured; "
            f"body {{query, max_results, mode}}: hybrid at max_results {MAX_RESULTS} and {MAX_RESULTS_WIDE}, "
            f"keyword at {MAX_RESULTS}",
            "keyword_only": "the API's mode=keyword on the same team (the same rows, vectors unused)",
            "sql": "SQL captured from one in-process embed_and_search call per query (CaptureQueriesContext), "
            "replayed verbatim inside the team's scope; the vector query runs after the same set_config "
            "statements as in the selector (not timed)",
            "interleaving": "each measured request runs API, selector, embedding and SQL back to back; "
            f"hybrid's max_results {MAX_RESULTS} and {MAX_RESULTS_WIDE} take turns on every query, in "
            "alternating order",
            "targets": f"the search targets, at the largest size measured ({size:,}); the raw vector top-k SQL is the "
            f"hybrid max_results {MAX_RESULTS} row's replayed vector query",
        },
        "seeding": seeding,
        "seeding_vectors_reused_from_earlier_run": embedder.loaded_from_disk,
        "results": results,
        "targets": targets,
        "scale": scale_part,
    }
