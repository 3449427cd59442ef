"""The keyword path: BM25 with each team's own statistics, kept by triggers on
search_chunk and rebuilt by reindex, over a bounded set of candidate chunks chosen from
the query's rarest lexemes through the GIN index (docs/search.md, "Keyword path: bounded
candidates and BM25")."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from memories.models import Memory
from search.models import Chunk, KeywordStat
from search.reindexing import reindex_team
from search.retrieval import candidates
from search.retrieval.candidates import SearchFilters, keyword_matches, keyword_sql, plan_keyword_query
from search.selectors import search_memories
from search.services import delete_team_index
from teams.models import Team
from teams.roles import as_owner
from teams.scope import dangerously_bypass_team_scope, team_scope
from tests.conftest import Agent, operator_view
from tests.factories import TeamFactory
from tests.search.plans import explain, rows_read, scans_of


def stats_of(team_id: int) -> dict[str, tuple[int, int]]:
    """The team's KeywordStat rows, lexeme → (chunks, length), zero rows left out."""
    with operator_view():
        return {
            row.lexeme: (row.chunks, row.length)
            for row in KeywordStat.objects.filter(team_id=team_id)
            if row.chunks
        }


def recount(team_id: int) -> dict[str, tuple[int, int]]:
    """What the statistics must be: counted again from the team's chunks."""
    with operator_view(), connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT u.lexeme, count(*) FROM search_chunk c, unnest(c.search_vector) u
            WHERE c.team_id = %s GROUP BY u.lexeme
            """,
            [team_id],
        )
        counted = {lexeme: (int(n), 0) for lexeme, n in cursor.fetchall()}
        cursor.execute(
            """
            SELECT count(*), coalesce(sum(length(c.search_vector)), 0)
            FROM search_chunk c WHERE c.team_id = %s
            """,
            [team_id],
        )
        chunks, length = cursor.fetchone()
    if chunks:
        counted[""] = (int(chunks), int(length))
    return counted


def test_statistics_follow_saves_updates_deletes_and_team_shutdown(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    team_id = member.team.id
    save(member, "deploy", "Deploys go through the blue green pipeline on Fridays")
    save(member, "kube", "The kubernetes cluster runs the pipeline workers")
    stats = stats_of(team_id)
    assert stats == recount(team_id)
    assert stats["pipelin"] == (2, 0)
    assert stats["kubernet"] == (1, 0)
    assert stats[""][0] == 2

    # A new version: its chunks are added, the old version's stay (search may show it).
    save(member, "kube", "The kubernetes cluster was retired in favour of nomad", supersede_reason="moved")
    assert stats_of(team_id) == recount(team_id)
    assert stats_of(team_id)["kubernet"] == (2, 0)

    # Chunks deleted (a hard delete cascades from the memory, as a purge does).
    with team_scope(team_id):
        Chunk.objects.filter(team_id=team_id, text__contains="nomad").delete()
    assert stats_of(team_id) == recount(team_id)
    assert "nomad" not in stats_of(team_id)

    with team_scope(team_id):
        counts = delete_team_index(team=member.team)
    assert counts["chunks"] == 2
    assert stats_of(team_id) == {}


def test_statistics_are_per_team(member: Agent, outsider: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "a", "zeppelin notes")
    save(outsider, "b", "zeppelin zeppelin notes about the mooring mast")
    assert stats_of(member.team.id) == recount(member.team.id)
    assert stats_of(outsider.team.id) == recount(outsider.team.id)
    assert stats_of(member.team.id)["zeppelin"] == stats_of(outsider.team.id)["zeppelin"] == (1, 0)
    assert stats_of(member.team.id)[""][1] < stats_of(outsider.team.id)[""][1]


def test_reindex_rebuilds_the_statistics(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    team_id = member.team.id
    save(member, "a", "Backups run nightly to the cold storage bucket")
    save(member, "b", "Restore drills happen every quarter from the cold bucket")
    expected = recount(team_id)
    with operator_view():
        KeywordStat.objects.filter(team_id=team_id).update(chunks=99, length=7)
        KeywordStat.objects.filter(team_id=team_id, lexeme="nightli").delete()
    assert stats_of(team_id) != expected
    reindex_team(team_id=team_id, profile="none")
    assert stats_of(team_id) == expected


def test_a_rare_word_now_outranks_repeats_of_a_common_one(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    """The intended change of BM25 over ts_rank: ts_rank has no idf, so two occurrences
    of a word nearly every entry holds beat one occurrence of a word one entry holds;
    BM25 weighs each word by its idf in the team."""
    for n in range(12):
        save(member, f"filler-{n}", f"Release notes number {n} for the service release")
    save(member, "repeats", "Release release checklist")
    save(member, "rare", "Zeppelin checklist")
    query = "release zeppelin"

    with team_scope(member.team.id), connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT m.key, ts_rank(c.search_vector, to_tsquery('english', 'release | zeppelin'))
            FROM search_chunk c JOIN memories_memory m ON m.id = c.memory_id
            WHERE c.team_id = %s AND m.key IN ('repeats', 'rare')
            """,
            [member.team.id],
        )
        old_rank = dict(cursor.fetchall())
    assert old_rank["repeats"] > old_rank["rare"], "ts_rank (the old ranking) put the repeats first"

    with team_scope(member.team.id):
        outcome = search_memories(
            team=member.team, query=query, embedding=None, max_results=3, explain=True, diversify=False
        )
    ranked = [r.key for r in outcome.results]
    assert ranked[:2] == ["rare", "repeats"]
    assert outcome.results[0].explain["keyword"] == pytest.approx(1.0)  # type: ignore[index]
    assert outcome.results[1].explain["keyword"] < 0.2  # type: ignore[index]


def test_plan_picks_the_rarest_lexemes_up_to_the_bound(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    for n in range(6):
        save(member, f"n-{n}", f"Service outage report {n}" + (" involving the zeppelin" if n < 2 else ""))
    with team_scope(member.team.id):
        plan = plan_keyword_query("outage zeppelin unknownword", member.team.id, bound=3)
        assert plan is not None
        assert plan.picked == ["zeppelin"]  # df 2; with outage (df 6) the sum would pass 3
        assert set(plan.lexemes) == {"zeppelin", "outag"}  # a word no chunk holds is dropped
        idf = dict(zip(plan.lexemes, plan.idf, strict=True))
        assert idf["zeppelin"] > idf["outag"] > 0
        # Always at least one lexeme, even past the bound.
        assert plan_keyword_query("outage", member.team.id, bound=1).picked == ["outag"]  # type: ignore[union-attr]
        assert plan_keyword_query("unknownword", member.team.id) is None


def test_a_chunks_score_is_bm25_over_its_own_term_frequencies(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    """The score the SQL gives each candidate, against BM25 computed here from the
    chunk's whole tsvector: repeated words count each time, words the query lacks count
    only in the chunk's length, and a long chunk is scored as exactly as a short one."""
    filler = " ".join(f"word{n}x" for n in range(40))
    save(member, "long", f"Zeppelin hangar notes: {filler}. The zeppelin and the zeppelin mast again.")
    save(member, "short", "Mooring mast for the zeppelin")
    save(member, "other", "Mooring lines are checked weekly")
    with team_scope(member.team.id):
        plan = plan_keyword_query("zeppelin mooring mast", member.team.id)
        assert plan is not None
        filters = SearchFilters(team_id=member.team.id, types=None, project=None, include_superseded=False)
        found = candidates.keyword_plan_matches(plan, filters, limit=None, memory_ids=None)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT c.id, u.lexeme, array_length(u.positions, 1), length(c.search_vector)"
                " FROM search_chunk c, unnest(c.search_vector) u WHERE c.team_id = %s",
                [member.team.id],
            )
            rows = cursor.fetchall()
    frequencies: dict[int, dict[str, int]] = {}
    lengths: dict[int, int] = {}
    for chunk_id, lexeme, occurrences, length in rows:
        frequencies.setdefault(chunk_id, {})[lexeme] = occurrences
        lengths[chunk_id] = length
    idf = dict(zip(plan.lexemes, plan.idf, strict=True))
    k1, b = candidates.BM25_K1, candidates.BM25_B

    def bm25(chunk_id: int) -> float:
        norm = k1 * (1 - b + b * lengths[chunk_id] / plan.avg_length)
        tf = frequencies[chunk_id]
        return sum(idf[lex] * tf[lex] * (k1 + 1) / (tf[lex] + norm) for lex in idf if lex in tf)

    assert len(found) == 3
    assert max(lengths[chunk_id] for _, _, chunk_id in found) > 40
    assert max(frequencies[chunk_id].get("zeppelin", 0) for _, _, chunk_id in found) == 3
    for _memory_id, rank, chunk_id in found:
        assert rank == pytest.approx(bm25(chunk_id), rel=1e-9)


def test_hybrid_completion_scores_candidates_outside_the_bounded_set(
    member: Agent,
    save,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A memory found by the other path gets its exact keyword score even when the
    bounded candidate set left it out: hybrid semantics are unchanged."""
    for n in range(5):
        save(member, f"n-{n}", f"Service outage report {n}")
    save(member, "z", "Outage of the zeppelin hangar")
    monkeypatch.setattr(candidates, "KEYWORD_CANDIDATE_CHUNKS", 1)
    filters = SearchFilters(team_id=member.team.id, types=None, project=None, include_superseded=True)
    with team_scope(member.team.id):
        bounded = keyword_matches("outage report", filters, limit=10)
        everything = keyword_matches(
            "outage report", filters, limit=None, memory_ids=[m for m, _, _ in bounded] + all_ids(member.team)
        )
    assert len(bounded) == 1
    assert len(everything) == 6
    assert dict((m, r) for m, r, _ in everything)[bounded[0][0]] == pytest.approx(bounded[0][1])


def all_ids(team: Team) -> list[Any]:
    with team_scope(team.id):
        return list(Chunk.objects.filter(team_id=team.id).values_list("memory_id", flat=True))


# --------------------------------------------------------------------------- plans

SEEDED_MEMORIES = 40
CHUNKS_PER_MEMORY = 100  # 4,000 chunks: big enough that PostgreSQL's choice is its own
RARE_TAGS = 997
# A chunk of about 200 words, as the chunker makes them (search.chunking: about 400 tokens).
FILLER = " and the weekly schedule of the team with its usual meetings" * 20


def chunk_scans(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        n
        for n in nodes
        if n.get("Relation Name") == "search_chunk" or n.get("Index Name", "").startswith("chunk_")
    ]


def candidate_rows(nodes: list[dict[str, Any]]) -> int:
    """The chunks the candidates function handed to the statement."""
    scans = [n for n in nodes if n.get("Function Name") == "search_keyword_candidates"]
    assert scans, nodes
    return sum(n["Actual Rows"] * n.get("Actual Loops", 1) for n in scans)


@pytest.fixture
def seeded(transactional_db: None) -> Team:
    """A team of 4,000 chunks (each holds 'shared routine note' and one of 997 tags) and
    another team of 1,000, with real statistics: ANALYZE as the owner role, as autovacuum
    would have by then."""
    team, other = TeamFactory(), TeamFactory()
    with dangerously_bypass_team_scope(reason="test data"), connection.cursor() as cursor:
        for owner, memories in ((team, SEEDED_MEMORIES), (other, SEEDED_MEMORIES // 4)):
            cursor.execute(
                """
                WITH rows AS (
                    INSERT INTO memories_memory (id, team_id, key, content, type, project, metadata, is_active,
                        deleted_by, supersede_reason, supersede_kind, updated_by, content_hash, index_state,
                        access_count, upvotes, downvotes, created_at, updated_at)
                    SELECT gen_random_uuid(), %(team)s, 'seed-' || n, 'seed ' || n, 'context', '', '{}', true,
                        '', '', '', 'seed', md5('seed' || n), 'indexed', 0, 0, 0, now(), now()
                    FROM generate_series(1, %(memories)s) AS n
                    RETURNING id
                )
                INSERT INTO search_chunk (team_id, memory_id, chunk_index, text, token_count, content_hash,
                    created_at)
                SELECT %(team)s, rows.id, i,
                    'shared routine note tag' || ((row_number() OVER ()) %% %(tags)s) || %(filler)s, 5,
                    md5(random()::text), now()
                FROM rows, generate_series(0, %(per)s - 1) AS i
                """,
                {
                    "team": owner.id,
                    "memories": memories,
                    "per": CHUNKS_PER_MEMORY,
                    "tags": RARE_TAGS,
                    "filler": FILLER,
                },
            )
    with as_owner(connection), connection.cursor() as cursor:
        cursor.execute("ANALYZE search_chunk, memories_memory, search_keywordstat")
    return team


# What search_keyword_candidates (migrations search.0005 and 0011) runs, as the operator
# role that owns it: the test checks the function's source holds it word for word.
CANDIDATES_STATEMENT = (
    "SELECT c.id, c.memory_id, c.search_vector FROM search_chunk c"
    " WHERE c.team_id = $1 AND c.search_vector @@ $2 LIMIT $3"
)


def candidates_statement_plan(team_id: int, query: str, bound: int) -> list[dict[str, Any]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT prosrc FROM pg_proc WHERE proname = 'search_keyword_candidates'")
        assert CANDIDATES_STATEMENT in cursor.fetchone()[0]
    with dangerously_bypass_team_scope(reason="test: the candidates function's own plan"):
        return explain(
            CANDIDATES_STATEMENT.replace("$1", "%s").replace("$2", "%s::tsquery").replace("$3", "%s"),
            [team_id, query, bound],
            analyze=True,
        )


def test_rare_lexemes_are_read_through_the_gin_index_and_no_scan_of_the_team(seeded: Team) -> None:
    filters = SearchFilters(team_id=seeded.id, types=None, project=None, include_superseded=False)
    team_chunks = SEEDED_MEMORIES * CHUNKS_PER_MEMORY
    with team_scope(seeded.id):
        # The old path, as the application role: every chunk of the team holding any
        # query lexeme, and even for a rare one, row-level security keeps the GIN index
        # out (`@@` is not leakproof): the team's chunks are all read and filtered.
        old = chunk_scans(
            explain(
                "SELECT c.id FROM search_chunk c WHERE c.team_id = %s AND c.search_vector @@ 'tag17'::tsquery",
                [seeded.id],
                analyze=True,
            )
        )
        assert not any(n.get("Index Name") == "chunk_search_vector" for n in old), old
        assert sum(n["Actual Rows"] + n.get("Rows Removed by Filter", 0) for n in old) >= team_chunks

        plan = plan_keyword_query("a routine note on tag17", seeded.id)
        assert plan is not None
        assert plan.picked == ["tag17"]
        sql, params = keyword_sql(plan, filters, limit=20)
        nodes = explain(sql, params, analyze=True)
        # The chunks and their vectors come from the candidates function: no scan of the
        # team, and no second read of a chunk it already read.
        assert chunk_scans(nodes) == [], chunk_scans(nodes)
        assert candidate_rows(nodes) == 4

        inner = candidates_statement_plan(seeded.id, "'tag17'", candidates.KEYWORD_CANDIDATE_CHUNKS)
        assert any(n.get("Index Name") == "chunk_search_vector" for n in inner), inner
        assert not any(n["Node Type"] == "Seq Scan" for n in inner), inner

        found = keyword_matches("a routine note on tag17", filters, limit=20)
    assert len(found) == 4  # tag17: chunks 17, 1014, 2011, 3008, one per memory


def test_the_statistics_of_a_querys_lexemes_are_read_by_index_not_all_the_teams(seeded: Team) -> None:
    with team_scope(seeded.id):
        team_rows = KeywordStat.objects.filter(team_id=seeded.id).count()
        with CaptureQueriesContext(connection) as ctx:
            plan = plan_keyword_query("a routine note on tag17", seeded.id)
        lookup = next(q["sql"] for q in ctx.captured_queries if "FROM search_keywordstat" in q["sql"])
        nodes = explain(lookup, None, analyze=True)

    assert plan is not None and plan.picked == ["tag17"]
    assert team_rows > 500
    indexes = {n["Index Name"] for n in nodes if "Index Name" in n}
    assert indexes == {"one_keyword_stat_per_team_lexeme"}, nodes
    # The query's lexemes and the team's totals row, not the team's hundreds of rows.
    heap = [n for n in scans_of(nodes, "search_keywordstat") if n["Node Type"] != "Bitmap Index Scan"]
    assert heap and rows_read(heap) <= 8, heap


def test_a_query_of_common_words_scores_a_bounded_number_of_chunks(
    seeded: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(candidates, "KEYWORD_CANDIDATE_CHUNKS", 300)
    filters = SearchFilters(team_id=seeded.id, types=None, project=None, include_superseded=False)
    with team_scope(seeded.id):
        plan = plan_keyword_query("shared routine note", seeded.id)
        assert plan is not None
        assert len(plan.picked) == 1  # each of them is in all 4,000 chunks
        sql, params = keyword_sql(plan, filters, limit=20)
        nodes = explain(sql, params, analyze=True)
        assert chunk_scans(nodes) == [], chunk_scans(nodes)
        assert candidate_rows(nodes) == 300
        inner = candidates_statement_plan(seeded.id, "'share'", 300)
        assert not any(n["Node Type"] == "Seq Scan" and n["Actual Rows"] > 300 for n in inner), inner
        found = keyword_matches("shared routine note", filters, limit=20)
    assert 1 <= len(found) <= 20


def test_statistics_stay_exact_under_concurrent_chunk_writes(transactional_db: None) -> None:
    """Four writers of one team insert and delete chunks with overlapping lexemes at once
    (each one's lexemes in another order): none deadlocks, and the statistics end equal
    to a recount."""
    team = TeamFactory()
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    with dangerously_bypass_team_scope(reason="test data"), connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO memories_memory (id, team_id, key, content, type, project, metadata, is_active,
                deleted_by, supersede_reason, supersede_kind, updated_by, content_hash, index_state,
                access_count, upvotes, downvotes, created_at, updated_at)
            SELECT gen_random_uuid(), %s, 'w-' || n, 'w', 'context', '', '{}', true, '', '', '', 'seed',
                md5('w' || n), 'indexed', 0, 0, 0, now(), now()
            FROM generate_series(0, 3) AS n
            """,
            [team.id],
        )
    with team_scope(team.id):
        memory_ids = list(Memory.objects.for_team(team.id).order_by("key").values_list("id", flat=True))
    start = threading.Barrier(len(memory_ids))
    errors: list[BaseException] = []

    def write(writer: int) -> None:
        try:
            start.wait(timeout=30)
            for round_ in range(12):
                order = words[writer:] + words[:writer] if round_ % 2 else list(reversed(words))
                with team_scope(team.id), transaction.atomic():
                    Chunk.objects.filter(team_id=team.id, memory_id=memory_ids[writer]).delete()
                    Chunk.objects.bulk_create(
                        Chunk(
                            team_id=team.id,
                            memory_id=memory_ids[writer],
                            chunk_index=i,
                            text=" ".join(order[: 3 + (i + round_) % 5]),
                            token_count=3,
                            content_hash=f"{writer}-{round_}-{i}",
                        )
                        for i in range(3)
                    )
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(n,)) for n in range(len(memory_ids))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)  # a hang detector only
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    assert stats_of(team.id) == recount(team.id)
    assert stats_of(team.id)[""][0] == 4 * 3


def test_the_candidates_function_reads_only_the_scopes_team(member: Agent, outsider: Agent, save) -> None:  # type: ignore[no-untyped-def]
    """search_keyword_candidates bypasses row-level security to use the GIN index: its
    team is the scope's, never an argument, and outside a scope it returns nothing."""
    save(member, "mine", "zeppelin hangar notes")
    save(outsider, "theirs", "zeppelin mooring mast")

    def found(query: str) -> set[int]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT chunk_id FROM search_keyword_candidates(%s::tsquery, 100)", [query])
            return {row[0] for row in cursor.fetchall()}

    with team_scope(member.team.id):
        mine = set(Chunk.objects.filter(team_id=member.team.id).values_list("id", flat=True))
        assert found("'zeppelin'") == mine
        assert found("'moor'") == set()  # only the other team has it
    with transaction.atomic():
        assert found("'zeppelin'") == set()
