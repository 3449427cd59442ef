"""Stored search columns on facts for the unified search (search.unified.search_facts;
docs/search.md, "Unified search"): the fact's words as a tsvector, and the trigrams of its
entity and key (search.0006's `search_team_trigrams`, team 0: they are compared with a
query's, never looked up by team), computed once when a version is written instead of
at every search (157 ms at 500 facts without them, in the unified bench). Generated
columns: every path that writes a fact (services, import, admin, raw SQL) fills them.
Not model fields: nothing but that search reads them."""

from django.db import migrations

NAMES = "translate(entity || ' ' || key, '._:@-/', '      ')"

ADD = f"""
ALTER TABLE memories_fact
    ADD COLUMN search_document tsvector
        GENERATED ALWAYS AS (to_tsvector('english'::regconfig, {NAMES} || ' ' || value)) STORED,
    ADD COLUMN name_trigrams text[]
        GENERATED ALWAYS AS (search_team_trigrams(0, {NAMES})) STORED;
"""

DROP = "ALTER TABLE memories_fact DROP COLUMN search_document, DROP COLUMN name_trigrams;"


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0007_conversation_chunks"),
        ("memories", "0014_facts"),
    ]

    operations = [migrations.RunSQL(ADD, reverse_sql=DROP)]
