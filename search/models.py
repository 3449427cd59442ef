"""What search reads: chunks of memory content, their embeddings, and a cache of
embeddings by content so that only text never seen before goes to a provider.

Everything here is derived from `Memory` rows and can be rebuilt by re-indexing.
"""

from __future__ import annotations

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from pgvector.django import VectorField

from memories.conversations.models import Conversation
from memories.models import Memory
from teams.models import Team, personal_owner_field

# The text search configuration of the stored tsvector and of every keyword query.
SEARCH_CONFIG = "english"


class Chunk(models.Model):
    """A piece of one memory version, about 400 tokens, with its stored tsvector."""

    # No index on the team alone: one of this table's indexes starts with the team
    # (docs/tenancy.md, "Indexes per team").
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="chunks")
    chunk_index = models.PositiveIntegerField()
    text = models.TextField()
    token_count = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64)
    search_vector = models.GeneratedField(
        expression=SearchVector("text", config=SEARCH_CONFIG),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["memory", "chunk_index"], name="one_chunk_per_memory_index"),
        ]
        indexes = [
            GinIndex(fields=["search_vector"], name="chunk_search_vector"),
            models.Index(fields=["team", "memory"], name="chunk_team_memory"),
        ]

    def __str__(self) -> str:
        return f"{self.memory_id}#{self.chunk_index}"


class ConversationChunk(models.Model):
    """A window of consecutive lines of one conversation (`first_line`..`last_line`),
    with its stored tsvector and its vector under the team's model at indexing time
    (search.conversation_index). A table apart from Chunk, so memory search reads
    exactly what it read before; a profile switch leaves these on the old model until
    the conversation is indexed again (their vector path then skips them)."""

    # No index on the team alone: one of this table's indexes starts with the team
    # (docs/tenancy.md, "Indexes per team").
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="chunks")
    first_line = models.PositiveIntegerField()
    last_line = models.PositiveIntegerField()
    text = models.TextField()
    content_hash = models.CharField(max_length=64)
    search_vector = models.GeneratedField(
        expression=SearchVector("text", config=SEARCH_CONFIG),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    model = models.CharField(max_length=200, blank=True, default="")
    embedding = VectorField(null=True, blank=True)
    # Its conversation's owner, copied by the database: row-level security hides it as it
    # hides the conversation.
    owner = personal_owner_field()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "conversation", "first_line"], name="one_conversation_chunk_per_start"
            ),
        ]
        indexes = [
            GinIndex(fields=["search_vector"], name="conversation_chunk_search"),
            models.Index(fields=["team", "model"], name="conversation_chunk_team_model"),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id}:{self.first_line}-{self.last_line}"


class ChunkEmbedding(models.Model):
    """The vector of one chunk under one embedding model.

    One row per (chunk, model), so that switching a team to another model (even of
    other dimensions) fills the new model's rows beside the old ones, and search keeps
    working on the old model until the switch is complete. The column has no fixed
    dimensions; each model gets its own partial HNSW index on `embedding::vector(n)`
    (see search.vector_index)."""

    # No index on the team alone: one of this table's indexes starts with the team
    # (docs/tenancy.md, "Indexes per team").
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    chunk = models.ForeignKey(Chunk, on_delete=models.CASCADE, related_name="embeddings")
    model = models.CharField(max_length=200)
    embedding = VectorField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["chunk", "model"], name="one_embedding_per_chunk_model"),
        ]
        indexes = [models.Index(fields=["team", "model"], name="chunk_embedding_team_model")]

    def __str__(self) -> str:
        return f"{self.chunk_id} @ {self.model}"


class KeywordStat(models.Model):
    """BM25 statistics of a team's chunks (docs/search.md, "Keyword path: bounded
    candidates and BM25"): per lexeme, how many of the team's chunks contain it; on the row
    with the empty lexeme (never a real one), how many chunks the team has and their summed
    length (lexeme occurrences). Kept by triggers on search_chunk (migration search.0005)
    in the transaction that writes the chunks, rebuilt by reindex_team."""

    # No index on the team alone: one of this table's indexes starts with the team
    # (docs/tenancy.md, "Indexes per team").
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    lexeme = models.TextField()
    chunks = models.BigIntegerField(default=0)
    length = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "lexeme"], name="one_keyword_stat_per_team_lexeme"),
        ]

    def __str__(self) -> str:
        return f"{self.lexeme or '(team)'}: {self.chunks}"


class KeyTrigrams(models.Model):
    """Each key of a team's memories once, for the keyword path's lookup of keys by
    trigrams (search.retrieval.trigrams): a stored `trigrams` column and its GIN index
    (migration search.0006), so a lookup never derives a key's trigrams again. A trigger
    on memories_memory adds the key of every version written; a key whose versions are
    all gone may stay (a lookup is joined to the memories and their filters)."""

    # No index on the team alone: one of this table's indexes starts with the team
    # (docs/tenancy.md, "Indexes per team").
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    key = models.CharField(max_length=200)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "key"], name="one_key_trigrams_per_team_key"),
        ]

    def __str__(self) -> str:
        return self.key


class EmbeddingCache(models.Model):
    """(team, content_hash, model) → vector: embeddings a team already paid for.

    Keyed per team: a save answers faster when its text is in the cache, so a cache
    shared by every team would tell team A (by timing) that team B holds a text. Each
    team's rows are under row-level security like every other team-scoped table and go
    with the team; the same text saved by two teams is embedded once for each."""

    # No index on the team alone: one of this table's indexes starts with the team
    # (docs/tenancy.md, "Indexes per team").
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    content_hash = models.CharField(max_length=64)
    model = models.CharField(max_length=200)
    dimensions = models.PositiveIntegerField()
    embedding = VectorField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "content_hash", "model"], name="one_cached_embedding_per_team_model"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.content_hash[:12]} @ {self.model}"
