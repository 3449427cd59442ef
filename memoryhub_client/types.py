"""The answers of a MemoryHub server, as the SDK returns them: TypedDicts of the JSON
bodies (a result is the server's JSON object, so `json.dumps` prints it as it came).

Generated from the server's OpenAPI schema by `make sdk` (tests/client/sdk_codegen.py):
do not edit by hand. A field's comment is its description in the schema."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

AnchorTypeEnum = Literal["url", "file", "api"]
BlankEnum = Literal[""]
ConflictEnum = Literal["duplicate", "contradiction"]
DraftOutputKindEnum = Literal["memory", "fact"]
DraftOutputStateEnum = Literal["pending", "accepted", "rejected", "merged"]
EndReasonEnum = Literal["ended", "expired"]
FactVersionOutputStateEnum = Literal["active", "superseded", "deleted"]
FormatEnum = Literal["markdown", "json"]
FreshnessEnum = Literal["fresh", "due", "anchor_broken", "contradicted"]
HistoryEventKindEnum = Literal["created", "hard", "soft", "unsupersede", "deleted", "archived", "confirmed"]
IndexStateEnum = Literal["pending", "indexed", "failed"]
InjectionEntryReasonEnum = Literal["identity", "pinned", "skill", "ranked", "relevant"]
InjectionLeftOutReasonEnum = Literal["cap", "budget"]
MatchedByEnum = Literal["content_hash", "embedding"]
MemoryBatchResultStatusEnum = Literal["created", "superseded", "unchanged", "duplicate", "error"]
MemoryStateEnum = Literal["active", "superseded", "deleted", "archived"]
MemoryTypeEnum = Literal["identity", "lesson", "decision", "context", "reference", "historical"]
NudgeOutputKindEnum = Literal["due", "anchor_broken", "contradiction", "prune", "fact_contradiction"]
NudgeStateEnum = Literal["open", "resolved", "dismissed"]
OutcomeEnum = Literal["created", "superseded", "unchanged"]
ResolutionEnum = Literal["confirm", "dismiss", "archive", "supersede", "compatible"]
SectionEnum = Literal["core", "pinned", "skill", "relevant"]
SessionStatusEnum = Literal["live", "stale", "ended"]
SupersedeKindEnum = Literal["hard", "soft", "unsupersede"]


class AgentSessionBootOutput(TypedDict):
    session: AgentSessionOutput
    # The other live sessions of the same project, most recently active first (at most 50).
    other_sessions: list[AgentSessionOutput]
    # How many of the team's sessions this boot ended for missing the TTL.
    expired_sessions: int
    # The memory block (markdown) to put at the top of the agent's prompt: the project's and team-wide
    # entries, as GET injection/?project= renders it. Null if it could not be built.
    injection: str | None


class AgentSessionOutput(TypedDict):
    id: str
    agent: str
    source: str
    project: str
    cwd: str
    pid: int | None
    host: str
    current_task: str
    # live; stale (no heartbeat within the TTL, not yet ended by a boot); ended.
    status: SessionStatusEnum
    started_at: str
    last_heartbeat_at: str
    ended_at: str | None
    end_reason: EndReasonEnum | BlankEnum


class Anchor(TypedDict):
    type: AnchorTypeEnum
    value: str
    # An HTTP status or a substring; absent when none.
    expect: NotRequired[int | str]


class AnchorValue(TypedDict):
    type: str
    value: str
    # A status (int) or a substring.
    expect: NotRequired[Any]


class AnchoredEntry(TypedDict):
    id: str
    key: str
    anchor: AnchorValue
    anchor_broken: bool


class AnnotationOutput(TypedDict):
    id: str
    # The version the note was written on.
    memory_id: str
    note: str
    created_by: str
    created_at: str


class BatchDuplicate(TypedDict):
    id: str
    key: str
    similarity: float
    # content_hash: the same text; embedding: a cosine similarity of at least the threshold.
    matched_by: MatchedByEnum


class ConversationHit(TypedDict):
    # The conversation's id (GET conversations/<id>/).
    id: str
    title: str
    session: str
    # The first line of the matching window (from 1).
    first_line: int
    # Its last line: read them with `?lines=first-last`.
    last_line: int
    # The window's lines, one `role: text` each.
    text: str


class DraftConversation(TypedDict):
    # The conversation the transcript was kept as (it may have expired).
    id: str
    # The first line holding the draft's excerpt (null: not found).
    first_line: int | None
    # The last line holding it.
    last_line: int | None


class DraftEntry(TypedDict):
    id: str
    key: str
    is_active: bool
    # This version in the API (GET).
    url: str


class DraftExtractOutput(TypedDict):
    # The drafts made; a learning already pending for the team is not drafted again.
    drafts: list[DraftOutput]
    # Pending drafts this extraction found again (their count went up); not the ones this same session
    # sent before.
    corroborated: list[DraftOutput]
    # A capture with the team's `capture_to_memory` on: the lesson entries saved instead of drafts.
    memories: list[DraftEntry]
    # A capture with the team's `capture_to_memory` on: entries saved from the same learning before,
    # confirmed by this capture (one confirmer per session).
    confirmed: list[DraftEntry]
    # Active facts the transcript stated again with the same value (no draft).
    confirmed_facts: list[FactOutput]
    # Fact contradictions opened: the transcript stated another value for an active fact.
    fact_nudges: list[NudgeOutput]
    # The conversation the transcript was kept as (null: not kept, or the team's quota of conversations
    # was reached).
    conversation: str | None


class DraftFactEntry(TypedDict):
    id: str
    entity: str
    key: str
    is_active: bool


class DraftOutput(TypedDict):
    id: str
    state: DraftOutputStateEnum
    # memory: type, key and content; fact: entity, fact_key and value (type is `fact`, key `entity/key`).
    kind: DraftOutputKindEnum
    type: str
    key: str
    content: str
    # A fact draft's entity (empty for a memory draft).
    entity: str
    # A fact draft's key within its entity (empty for a memory draft).
    fact_key: str
    # A fact draft's value (empty for a memory draft).
    value: str
    why: str
    # [start, end) in the scrubbed, code-free transcript.
    source_span: list[int]
    source_excerpt: str
    source_session: str
    source_conversation: DraftConversation | None
    extractor: str
    created_by: str
    created_at: str
    # duplicate: an active entry holds this already; contradiction: one disagrees with it.
    conflict: ConflictEnum | BlankEnum
    conflict_entry: DraftEntry | None
    reviewed_at: str | None
    reviewed_by: str
    # The version it became.
    memory_entry: DraftEntry | None
    # The fact version it became.
    fact_entry: DraftFactEntry | None
    # How many times another session's extraction found this learning again while it was pending.
    corroborated: int
    # When it was last found again (null: never).
    last_corroborated_at: str | None


class Error(TypedDict):
    # A short, stable code, e.g. `not_found` or `invalid`.
    error: str
    # What went wrong, for a person or an agent to read.
    detail: str
    # Validation messages per input field (`non_field_errors`: the whole body).
    fields: NotRequired[dict[str, Any]]
    # With 429: seconds to wait before retrying, as in the Retry-After header.
    retry_after: NotRequired[int]


class Explain(TypedDict):
    # Cosine similarity of the best chunk, 0..1.
    vector: float
    # Hybrid mode: the cosine placed in this query's band of cosines, 1 for the highest, 0 for the lowest
    # (a band narrower than 0.25 counts as 0.25 wide).
    vector_relative: NotRequired[float]
    # Hybrid mode: this query's best w_vec * vector + w_kw * keyword (one value per query).
    evidence: NotRequired[float]
    # Full-text rank divided by this query's best rank, 0..1.
    keyword: float
    # Hybrid mode, only for an identifier-like query (one or two words, one holding a digit, `_`, a
    # camelCase capital or `-` `.` `:` `/` `@` inside) that the keyword path matched: the keyword path's
    # weight for this query, the larger of the team's two (the vector path has the other).
    keyword_weight: NotRequired[float]
    # Hybrid mode: (w_vec * vector_relative + w_kw * keyword) * evidence; a single mode: that path's part.
    merged: float
    # 0.05 per name or short quoted phrase of the query found exactly (case-sensitive, whole words) in the
    # entry, at most 0.15; hybrid mode only, 0 otherwise.
    entity: float
    # 0.5 ** (age / half-life); 1 for identity and lesson.
    decay: float
    # 1 + 0.05 * clamp(upvotes - downvotes, -5, 5): 0.75..1.25, 1 when unrated. score = (merged + entity)
    # * decay * rating.
    rating: float
    # λ * score - (1 - λ) * similarity to results above.
    mmr: float | None


class FactHistoryOutput(TypedDict):
    entity: str
    key: str
    # Versions, newest first.
    history: list[FactVersionOutput]
    next: str | None
    previous: str | None


class FactHit(TypedDict):
    entity: str
    key: str
    value: str
    scope: str
    sensitivity: str


class FactOutput(TypedDict):
    id: str
    entity: str
    key: str
    value: str
    scope: str
    domains: list[str]
    sensitivity: str
    confidence: float
    is_active: bool
    supersedes: str | None
    supersede_reason: str
    # Who set it: a token's name (with `/<session>`), or a person.
    updated_by: str
    # The agent session it was set in, if one was named.
    session: str
    # The accepted draft it came from.
    source_draft: str | None
    created_at: str
    deleted_at: str | None
    deleted_by: str


class FactSetOutput(TypedDict):
    id: str
    entity: str
    key: str
    value: str
    scope: str
    domains: list[str]
    sensitivity: str
    confidence: float
    is_active: bool
    supersedes: str | None
    supersede_reason: str
    # Who set it: a token's name (with `/<session>`), or a person.
    updated_by: str
    # The agent session it was set in, if one was named.
    session: str
    # The accepted draft it came from.
    source_draft: str | None
    created_at: str
    deleted_at: str | None
    deleted_by: str
    # `unchanged`: the active version already held exactly this; nothing was written.
    outcome: OutcomeEnum
    # Credentials redacted from the value, by kind.
    redactions: dict[str, int]


class FactVersionOutput(TypedDict):
    id: str
    entity: str
    key: str
    value: str
    scope: str
    domains: list[str]
    sensitivity: str
    confidence: float
    is_active: bool
    supersedes: str | None
    supersede_reason: str
    # Who set it: a token's name (with `/<session>`), or a person.
    updated_by: str
    # The agent session it was set in, if one was named.
    session: str
    # The accepted draft it came from.
    source_draft: str | None
    created_at: str
    deleted_at: str | None
    deleted_by: str
    state: FactVersionOutputStateEnum
    # The version that replaced this one.
    superseded_by: str | None


class HistoryEvent(TypedDict):
    kind: HistoryEventKindEnum
    # The supersede reason; for `confirmed`, the confirmation's note.
    reason: str
    by: str
    at: str
    memory: MemoryOutput


class InjectionCounts(TypedDict):
    # Active identity, lesson, decision and context entries and always-on skills (in the project filter).
    candidates: int
    included: int
    included_relevant: int
    # Facts in the block's Facts section.
    included_facts: int
    left_out_cap: int
    left_out_budget: int
    # Left out and counted above, but not listed: past the first max_entries + 50 entries of the order.
    left_out_unlisted: int


class InjectionEntry(TypedDict):
    id: str
    key: str
    type: MemoryTypeEnum
    project: str
    # core: by type and recency; skill: an always-on skill; relevant: found by the query.
    section: SectionEnum
    # core and skill: position in the injection order (identity, always-on skills, lesson, then decisions
    # newest first, then context newest first); relevant: position among the search results.
    rank: int
    # identity: always in; skill: an always-on skill within the cap and the budget; ranked: within the cap
    # and the budget; relevant: found by the query.
    reason: InjectionEntryReasonEnum
    # Tokens of the rendered block.
    tokens: int
    created_at: str
    # Search score (relevant entries only).
    score: NotRequired[float]
    content: str


class InjectionLeftOut(TypedDict):
    id: str
    key: str
    type: MemoryTypeEnum
    section: SectionEnum
    rank: int
    # cap: the entry cap was reached; budget: the block did not fit the tokens left.
    reason: InjectionLeftOutReasonEnum
    # Tokens of the block; null when the cap left it out unmeasured.
    tokens: int | None


class InjectionOutput(TypedDict):
    format: FormatEnum
    # The block, in markdown, ready to put in a prompt.
    text: str
    project: str | None
    max_entries: int
    tokens: InjectionTokens
    counts: InjectionCounts
    # Set when a query was given.
    search_mode: str | None
    warnings: list[str]
    # Open nudges in the block's "Please review" section (at most 3, within the budget).
    review: list[InjectionReview]
    # The other live sessions of the team in the block's "Other sessions now" section (at most 5, within
    # the budget; never the caller's own X-MemoryHub-Session).
    sessions: list[InjectionSession]
    # format=json: included entries.
    entries: NotRequired[list[InjectionEntry]]
    # format=json: left-out entries, in order, with why.
    left_out: NotRequired[list[InjectionLeftOut]]


class InjectionReview(TypedDict):
    # The nudge's id, for POST nudges/{id}/resolve/.
    id: str
    kind: str
    keys: list[str]
    message: str


class InjectionSession(TypedDict):
    id: str
    agent: str
    project: str
    task: str
    started_at: str


class InjectionTokens(TypedDict):
    used: int
    budget: int


class MemoryBatchOutput(TypedDict):
    # One per entry, in the order of `entries`.
    results: list[MemoryBatchResult]
    # Entries per status.
    counts: dict[str, int]


class MemoryBatchResult(TypedDict):
    # The entry's place in `entries`, from 0.
    index: int
    # The entry's key as sent (empty when it sent none).
    key: str
    # created: a new key (or a longer duplicate that replaced another key's entry, see
    # `replaced_duplicate`); superseded: a new version of the key; unchanged: the key's active entry
    # already holds exactly this, nothing written; duplicate: another active entry holds the text, nothing
    # written (`duplicate_of`); error: refused, nothing written (`error`).
    status: MemoryBatchResultStatusEnum
    # created/superseded: the new version; unchanged: the active entry; duplicate: the entry that holds
    # the text.
    id: NotRequired[str]
    duplicate_of: NotRequired[BatchDuplicate]
    replaced_duplicate: NotRequired[BatchDuplicate]
    redactions: NotRequired[list[Redaction]]
    # The one error shape, as a single save answers it.
    error: NotRequired[Error]


class MemoryDetailOutput(TypedDict):
    id: str
    key: str
    content: str
    type: MemoryTypeEnum
    project: str
    # `team`, `project:<name>`, or `user:<username>` for a personal entry (its key starts with
    # `@<username>`; only that person sees it).
    scope: str
    metadata: dict[str, Any]
    is_active: bool
    state: MemoryStateEnum
    supersedes_id: str | None
    supersede_reason: str
    supersede_kind: SupersedeKindEnum | BlankEnum
    superseded_by: SupersededBy | None
    # On an unsupersede: the version whose content it restored.
    restored_from_id: str | None
    updated_by: str
    created_at: str
    updated_at: str
    deleted_at: str | None
    archived_at: str | None
    archived_by: str
    index_state: IndexStateEnum
    access_count: int
    last_accessed_at: str | None
    upvotes: int
    downvotes: int
    # Net score: upvotes - downvotes.
    rating: int
    # Set when the entry is a skill.
    skill_trigger: SkillTrigger | None
    # What the entry can be checked against.
    anchor: Anchor | None
    # Always injected, right after identity.
    pinned: bool
    # The alias `type` was given as (e.g. "meeting"); empty for a canonical type.
    original_type: str
    # Captured from a session (an accepted or merged draft), not saved on purpose.
    auto_captured: bool
    # When the version was made, or last confirmed as still true since.
    last_confirmed_at: str
    # How many distinct agents or people confirmed this version.
    confirmed_by_count: int
    # contradicted, anchor_broken, due (unconfirmed longer than the team's window for its type) or fresh;
    # null for a superseded or deleted version.
    freshness: FreshnessEnum | None
    # The newest notes written on any version of this key, newest first.
    annotations: list[AnnotationOutput]


class MemoryDuplicateOutput(TypedDict):
    # Always false: nothing was written.
    saved: bool
    detail: str
    # The active entry that already holds the text.
    duplicate_of: MemoryOutput
    # Cosine similarity, best over pairs of chunks; 1 for the same text.
    similarity: float
    # content_hash: the same text; embedding: a cosine similarity of at least the threshold.
    matched_by: MatchedByEnum
    # The team's dedup_threshold.
    threshold: float
    redactions: list[Redaction]


class MemoryHistoryOutput(TypedDict):
    key: str
    history: list[HistoryEvent]
    # The next (older) page, or null.
    next: str | None
    # The previous (newer) page, or null.
    previous: str | None


class MemoryOutput(TypedDict):
    id: str
    key: str
    content: str
    type: MemoryTypeEnum
    project: str
    # `team`, `project:<name>`, or `user:<username>` for a personal entry (its key starts with
    # `@<username>`; only that person sees it).
    scope: str
    metadata: dict[str, Any]
    is_active: bool
    state: MemoryStateEnum
    supersedes_id: str | None
    supersede_reason: str
    supersede_kind: SupersedeKindEnum | BlankEnum
    superseded_by: SupersededBy | None
    # On an unsupersede: the version whose content it restored.
    restored_from_id: str | None
    updated_by: str
    created_at: str
    updated_at: str
    deleted_at: str | None
    archived_at: str | None
    archived_by: str
    index_state: IndexStateEnum
    access_count: int
    last_accessed_at: str | None
    upvotes: int
    downvotes: int
    # Net score: upvotes - downvotes.
    rating: int
    # Set when the entry is a skill.
    skill_trigger: SkillTrigger | None
    # What the entry can be checked against.
    anchor: Anchor | None
    # Always injected, right after identity.
    pinned: bool
    # The alias `type` was given as (e.g. "meeting"); empty for a canonical type.
    original_type: str
    # Captured from a session (an accepted or merged draft), not saved on purpose.
    auto_captured: bool
    # When the version was made, or last confirmed as still true since.
    last_confirmed_at: str
    # How many distinct agents or people confirmed this version.
    confirmed_by_count: int
    # contradicted, anchor_broken, due (unconfirmed longer than the team's window for its type) or fresh;
    # null for a superseded or deleted version.
    freshness: FreshnessEnum | None


class MemoryReadOutput(TypedDict):
    id: str
    key: str
    content: str
    type: MemoryTypeEnum
    project: str
    # `team`, `project:<name>`, or `user:<username>` for a personal entry (its key starts with
    # `@<username>`; only that person sees it).
    scope: str
    metadata: dict[str, Any]
    is_active: bool
    state: MemoryStateEnum
    supersedes_id: str | None
    supersede_reason: str
    supersede_kind: SupersedeKindEnum | BlankEnum
    superseded_by: SupersededBy | None
    # On an unsupersede: the version whose content it restored.
    restored_from_id: str | None
    updated_by: str
    created_at: str
    updated_at: str
    deleted_at: str | None
    archived_at: str | None
    archived_by: str
    index_state: IndexStateEnum
    access_count: int
    last_accessed_at: str | None
    upvotes: int
    downvotes: int
    # Net score: upvotes - downvotes.
    rating: int
    # Set when the entry is a skill.
    skill_trigger: SkillTrigger | None
    # What the entry can be checked against.
    anchor: Anchor | None
    # Always injected, right after identity.
    pinned: bool
    # The alias `type` was given as (e.g. "meeting"); empty for a canonical type.
    original_type: str
    # Captured from a session (an accepted or merged draft), not saved on purpose.
    auto_captured: bool
    # When the version was made, or last confirmed as still true since.
    last_confirmed_at: str
    # How many distinct agents or people confirmed this version.
    confirmed_by_count: int
    # contradicted, anchor_broken, due (unconfirmed longer than the team's window for its type) or fresh;
    # null for a superseded or deleted version.
    freshness: FreshnessEnum | None
    # The newest notes written on any version of this key, newest first.
    annotations: list[AnnotationOutput]
    # The first line of `content`, from 1.
    from_line: int
    # The last line of `content` (0 for an empty text).
    to_line: int
    # How many lines the whole text has.
    total_lines: int
    # Lines follow `to_line`: read on from `to_line` + 1.
    has_more: bool


class MemorySavedOutput(TypedDict):
    id: str
    key: str
    content: str
    type: MemoryTypeEnum
    project: str
    # `team`, `project:<name>`, or `user:<username>` for a personal entry (its key starts with
    # `@<username>`; only that person sees it).
    scope: str
    metadata: dict[str, Any]
    is_active: bool
    state: MemoryStateEnum
    supersedes_id: str | None
    supersede_reason: str
    supersede_kind: SupersedeKindEnum | BlankEnum
    superseded_by: SupersededBy | None
    # On an unsupersede: the version whose content it restored.
    restored_from_id: str | None
    updated_by: str
    created_at: str
    updated_at: str
    deleted_at: str | None
    archived_at: str | None
    archived_by: str
    index_state: IndexStateEnum
    access_count: int
    last_accessed_at: str | None
    upvotes: int
    downvotes: int
    # Net score: upvotes - downvotes.
    rating: int
    # Set when the entry is a skill.
    skill_trigger: SkillTrigger | None
    # What the entry can be checked against.
    anchor: Anchor | None
    # Always injected, right after identity.
    pinned: bool
    # The alias `type` was given as (e.g. "meeting"); empty for a canonical type.
    original_type: str
    # Captured from a session (an accepted or merged draft), not saved on purpose.
    auto_captured: bool
    # When the version was made, or last confirmed as still true since.
    last_confirmed_at: str
    # How many distinct agents or people confirmed this version.
    confirmed_by_count: int
    # contradicted, anchor_broken, due (unconfirmed longer than the team's window for its type) or fresh;
    # null for a superseded or deleted version.
    freshness: FreshnessEnum | None
    hint: TypeHint | None
    # Set when the text looks like an operational value (a counter, a timestamp, a progress figure) that
    # belongs in the vault. Saved all the same.
    vault_hint: str | None
    redactions: list[Redaction]
    # Set when the text was a longer version of another key's active entry: that entry was superseded by
    # this one (soft, see `supersedes_id` and `supersede_reason`).
    replaced_duplicate: ReplacedDuplicate | None


class NudgeEntry(TypedDict):
    id: str
    key: str
    type: str
    # False when the key moved on since the nudge was made.
    is_active: bool
    # This version in the API (GET).
    url: str


class NudgeFact(TypedDict):
    # The fact's version the nudge was made on.
    id: str
    entity: str
    key: str
    sensitivity: str
    # False when the fact moved on since the nudge was made.
    is_active: bool
    # That version's value; null for a `high` fact and a read-only token.
    current_value: str | None
    # The value the conversation stated; null for a `high` fact and a read-only token.
    extracted_value: str | None


class NudgeOutput(TypedDict):
    id: str
    kind: NudgeOutputKindEnum
    state: NudgeStateEnum
    # What to do.
    message: str
    # The keys it concerns (two for a contradiction; `entity/key` for a fact contradiction).
    keys: list[str]
    entries: list[NudgeEntry]
    # A fact contradiction's fact; null for other kinds.
    fact: NudgeFact | None
    # What the job found (kind-specific).
    details: dict[str, Any]
    # A contradiction's confidence (0..1); null for other kinds.
    confidence: float | None
    resolution: ResolutionEnum | BlankEnum
    created_at: str
    resolved_at: str | None
    resolved_by: str


class Redaction(TypedDict):
    kind: str
    count: int


class ReplacedDuplicate(TypedDict):
    id: str
    key: str
    similarity: float
    # content_hash: the same text; embedding: a cosine similarity of at least the threshold.
    matched_by: MatchedByEnum


class SearchOutput(TypedDict):
    # hybrid, keyword or vector: the paths that ran (keyword when vectors were unavailable).
    search_mode: str
    results: list[SearchResult]
    warnings: list[str]


class SearchResult(TypedDict):
    # The memory version's id; a fact's, or a conversation's for those.
    id: str
    # Which source it is from: memories, facts or conversations. A fact's `key` is `entity/key` and its
    # `type` `fact`; a conversation's `key` is its title and its `type` `conversation`.
    origin: str
    # A fact hit's entity, key and value.
    fact: NotRequired[FactHit]
    # A conversation hit: its id, the line range and the matching text.
    conversation: NotRequired[ConversationHit]
    key: str
    snippet: str
    score: float
    type: str
    is_active: bool
    # Which paths found it: keyword, vector or keyword+vector; skill_trigger for a skill whose keyword is
    # in the query.
    source: str
    # True for skills brought in by a keyword of theirs (listed first, score 1, not counted in
    # max_results); false for the other results.
    via_skill_trigger: bool
    # The skill's name (skill results only).
    skill: NotRequired[str]
    # The skill keyword found in the query (skill results only).
    matched_keyword: NotRequired[str]
    created_at: str
    # True for a replaced version (only with include_superseded): it follows the current entry of its key,
    # and `superseded_by` names the version that replaced it.
    superseded: bool
    superseded_by: NotRequired[SupersededBy | None]
    # Net score of this version: upvotes - downvotes.
    rating: int
    # The newest notes written on any version of this key, newest first.
    annotations: list[AnnotationOutput]
    explain: NotRequired[Explain]


class SkillTrigger(TypedDict):
    name: str
    # Stored lowercase.
    keywords: list[str]
    projects: list[str]
    always_on: bool


class SupersededBy(TypedDict):
    id: str
    key: str
    reason: str
    # How it was replaced: hard, soft, unsupersede.
    kind: str
    # False when it was itself replaced or deleted since.
    is_active: bool


class TypeHint(TypedDict):
    suggested_type: MemoryTypeEnum
    reason: str
