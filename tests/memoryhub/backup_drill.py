"""The data side of the restore drill (tests/memoryhub/test_backup_restore.py).

`python -m tests.memoryhub.backup_drill populate` fills the database of its environment's
settings through the services, as the service itself would (two teams, a supersede chain,
vectors of the local embedding model written by the in-process indexing, vault secrets);
`python -m tests.memoryhub.backup_drill inspect` prints, as one JSON line, everything the
drill compares before the backup and after the restore, then searches and checks the
application role's isolation. Both log in as the application role, like the service.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

TEAMS = ("drill-alpha", "drill-bravo")
SECRET_VALUES = {
    "drill-alpha": "Alpha-deploy-token-4f8a1c7e9b2d",
    "drill-bravo": "Bravo-deploy-token-7d3e9a0f5c1b",
}
# The memory the search must find by meaning: it shares no word with the query.
SEARCHED_KEY = "release-day"
SEARCH_QUERY = "which weekday do we ship"


def populate() -> None:
    from memories import writes as memories
    from teams import services as teams
    from teams.scope import team_scope

    for slug in TEAMS:
        team = teams.create_team(slug=slug, name=slug.title())
        with team_scope(team.id):
            memories.save_memory(
                team=team,
                key=SEARCHED_KEY,
                content=f"{slug}: deploys go out on Tuesday mornings.",
                updated_by="drill",
            )
            memories.save_memory(
                team=team,
                key="database",
                content=f"{slug} keeps its rows in PostgreSQL 16.",
                type_name="decision",
                updated_by="drill",
            )
        # Each version in a transaction of its own, so each is indexed after its commit.
        for version, reason in ((17, "upgraded"), (18, "upgraded again")):
            with team_scope(team.id):
                memories.save_memory(
                    team=team,
                    key="database",
                    content=f"{slug} keeps its rows in PostgreSQL {version}.",
                    supersede_reason=reason,
                    updated_by="drill",
                )
        with team_scope(team.id):
            teams.set_vault_entry(
                team=team, key="deploy-token", value=SECRET_VALUES[slug], is_secret=True, actor="drill"
            )
            teams.set_vault_entry(team=team, key="region", value="eu-west", is_secret=False, actor="drill")


def _digest(value: object) -> str:
    return hashlib.sha256(str(value).encode()).hexdigest()


def _catalog() -> dict[str, Any]:
    """Owners, grants, row-level security and policies of everything in `public`."""
    from django.db import connection

    queries = {
        "relations": """
            SELECT c.relname, c.relkind, pg_get_userbyid(c.relowner), coalesce(c.relacl::text, ''),
                   c.relrowsecurity, c.relforcerowsecurity
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'i')
            ORDER BY c.relname""",
        "policies": """
            SELECT tablename, policyname, cmd, roles::text, qual, with_check FROM pg_policies
            WHERE schemaname = 'public' ORDER BY tablename, policyname""",
        "functions": """
            SELECT p.proname, pg_get_userbyid(p.proowner), coalesce(p.proacl::text, ''), p.prosecdef
            FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'public' AND NOT EXISTS (
                SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
            )
            ORDER BY p.proname""",
        "triggers": """
            SELECT tgrelid::regclass::text, tgname FROM pg_trigger WHERE NOT tgisinternal
            ORDER BY 1, 2""",
        "default_privileges": """
            SELECT pg_get_userbyid(defaclrole), defaclobjtype, defaclacl::text FROM pg_default_acl
            ORDER BY 1, 2""",
    }
    with connection.cursor() as cursor:
        found = {}
        for name, query in queries.items():
            cursor.execute(query)
            found[name] = [list(row) for row in cursor.fetchall()]
    return found


def _rows() -> dict[str, Any]:
    from memories.models import Memory
    from search.models import Chunk, ChunkEmbedding, EmbeddingCache, KeywordStat
    from teams.models import Team, VaultEntry
    from teams.scope import dangerously_bypass_team_scope
    from teams.vault_crypto import decrypt

    with dangerously_bypass_team_scope(reason="restore drill"):
        memories = [
            [
                *(str(m.id), m.team.slug, m.key, m.content, m.is_active, str(m.supersedes_id)),
                *(m.index_state, m.index_attempts, str(m.index_queued_at), m.content_hash),
                m.created_at.isoformat(),
            ]
            for m in Memory.objects.select_related("team").order_by("created_at", "id")
        ]
        vectors = [
            [e.chunk_id, e.model, _digest(list(e.embedding))]
            for e in ChunkEmbedding.objects.order_by("chunk_id", "model")
        ]
        return {
            "teams": sorted(Team.objects.values_list("slug", flat=True)),
            "memories": memories,
            "chunks": [[c.id, str(c.memory_id), c.text] for c in Chunk.objects.order_by("id")],
            "vectors": vectors,
            "embedding_cache": [
                [c.content_hash, c.model, _digest(list(c.embedding))]
                for c in EmbeddingCache.objects.order_by("content_hash", "model")
            ],
            "keyword_stats": sorted(
                [s.team_id, s.lexeme, s.chunks, s.length] for s in KeywordStat.objects.all()
            ),
            "vault": sorted(
                [e.team.slug, e.key, decrypt(e.ciphertext) if e.is_secret else e.value]
                for e in VaultEntry.objects.select_related("team")
            ),
        }


def _search_and_isolation() -> dict[str, Any]:
    from django.db import connection

    from search.run_search import embed_and_search
    from teams.models import Team
    from teams.scope import dangerously_bypass_team_scope, team_scope

    with dangerously_bypass_team_scope(reason="restore drill"):
        alpha, bravo = (Team.objects.get(slug=slug) for slug in TEAMS)
    with team_scope(alpha.id):
        outcome = embed_and_search(team=alpha, query=SEARCH_QUERY, max_results=3, explain=True)
        with connection.cursor() as cursor:
            seen = {}
            for table in ("memories_memory", "search_chunk", "search_chunkembedding", "teams_vaultentry"):
                cursor.execute(f"SELECT count(*) FROM {table} WHERE team_id = %s", [bravo.id])  # noqa: S608
                seen[table] = cursor.fetchone()[0]
            cursor.execute("SELECT current_user")
            user = cursor.fetchone()[0]
    return {
        "search_mode": outcome.search_mode,
        "found": [result.key for result in outcome.results],
        "explain": [result.explain for result in outcome.results],
        "bravo_rows_seen_by_alpha": seen,
        "user": user,
    }


def inspect() -> None:
    before = _rows()
    searched = _search_and_isolation()
    # The search embedded its query only: every stored vector is as it was.
    after = _rows()
    print(json.dumps({**before, "catalog": _catalog(), **searched, "rows_after_search": after == before}))


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    {"populate": populate, "inspect": inspect}[sys.argv[1]]()
