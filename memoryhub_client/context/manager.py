"""`ContextManager`: the context window of an agent that runs its own loop, kept within
the model's window, with what is worth remembering written to MemoryHub before any turn
leaves the context.

The context is the system prompt, the memory block injected at start (`inject_memory`),
the summary of folded turns, and the turns. A turn is one message, or an assistant
message with tool calls together with the tool results that answer them: a turn is kept,
flushed, folded or dropped whole, so a tool call never loses its result. After each
`add`, the share of the window in use decides, in this order:

- `flush` (60 %): the turns older than the newest `keep_recent` are sent to the server's
  extractor (`POST drafts/extract/`), which proposes what to remember as drafts for review
  (or, with `FlushPolicy(target="entries")`, saves the ones without a conflict as
  entries, where the token may). A turn is flushed once.
- `compact` (70 %): the oldest of those turns are replaced by a summary (`summariser`)
  until the context is at most `compact_to` (50 %); any of them not flushed yet is flushed
  first (write, then compact), and when that flush fails they stay.
- `warn` (80 %): a warning (logged, and an event), once each time the context passes it.
- `prune` (90 %): the oldest turns are dropped until the context is at most `prune_to`
  (60 %), flushed first where they were not (a failed flush does not stop a prune: the
  model must fit its window). The system prompt and the injected memory are never
  dropped, the newest turn neither.

Each step is an `Event`, returned by `add` and kept in `events`. Not thread-safe: one
manager per conversation, used from one thread (`asyncio.to_thread(manager.add, message)`
from asyncio)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from memoryhub_client.context.summaries import RuleSummariser, Summariser, transcript_of
from memoryhub_client.context.tokens import (
    TOKENS_PRIMING_REPLY,
    CallableCounter,
    TokenCounter,
    counter_for,
    message_tokens,
)
from memoryhub_client.context.windows import window_of
from memoryhub_client.errors import Conflict, Forbidden, MemoryHubError
from memoryhub_client.hub import MemoryHub
from memoryhub_client.operations import MAX_SOURCE_SESSION_CHARS, MAX_TRANSCRIPT_CHARS

logger = logging.getLogger("memoryhub_client.context")

Message = Mapping[str, Any]
EventKind = Literal[
    "flushed", "flush_failed", "compacted", "compaction_deferred", "warned", "pruned", "memory_unavailable"
]
MEMORY_HEADING = "Team memory (from MemoryHub):"
SUMMARY_HEADING = "Summary of the earlier conversation:"


@dataclass(frozen=True)
class Thresholds:
    """Shares of the window (0..1] at which each step runs, and where compaction and
    pruning stop. `keep_recent` newest turns are neither flushed nor folded (the exchange
    in progress); `summary_share` of the window is the summary's budget."""

    flush: float = 0.6
    compact: float = 0.7
    warn: float = 0.8
    prune: float = 0.9
    compact_to: float = 0.5
    prune_to: float = 0.6
    keep_recent: int = 4
    summary_share: float = 0.05

    def __post_init__(self) -> None:
        if not 0 < self.flush <= self.compact <= self.warn <= self.prune <= 1:
            raise ValueError("thresholds must rise: 0 < flush <= compact <= warn <= prune <= 1")
        if not 0 < self.compact_to < self.compact or not 0 < self.prune_to < self.prune:
            raise ValueError("compact_to and prune_to must be below compact and prune")
        if self.keep_recent < 1 or not 0 < self.summary_share < self.compact_to:
            raise ValueError("keep_recent must be at least 1, summary_share within (0, compact_to)")


@dataclass(frozen=True)
class FlushPolicy:
    """What a flush writes and where. `target`: `drafts` (proposals a person reviews) or
    `entries` (drafts without a conflict accepted at once: needs a token with the write
    scope; where the server refuses, they stay drafts). `roles`: whose messages are sent
    (the tool results only with `tool_results`). A flush waits until the turns to send
    hold `min_tokens` (default: 5 % of the window), unless a compaction or a prune needs
    them. `source_session` labels the drafts (default: the hub's session, or
    `context-manager`)."""

    enabled: bool = True
    target: Literal["drafts", "entries"] = "drafts"
    roles: tuple[str, ...] = ("user", "assistant")
    tool_results: bool = False
    min_tokens: int | None = None
    source_session: str | None = None


@dataclass(frozen=True)
class Event:
    """One step the manager took: `kind`, the context's tokens before and after, how many
    turns it concerned, the drafts made and the keys saved (a flush), and a detail."""

    kind: EventKind
    tokens_before: int
    tokens_after: int
    turns: int = 0
    drafts: tuple[str, ...] = ()
    entries: tuple[str, ...] = ()
    detail: str = ""


@dataclass
class _Turn:
    messages: list[dict[str, Any]]
    tokens: int
    tool_ids: set[str] = field(default_factory=set)
    flushed: bool = False


class ContextManager:
    """The context of one conversation with `model`, kept within its window, flushing to
    `hub` (a `MemoryHub`; None: nothing is written or injected).

    `window` defaults to the model's (`windows` adds or overrides prefixes); tokens are
    counted with the model's tokenizer where one ships offline, else estimated
    (`counter`: any `TokenCounter`, or a function from text to a count). `system` is the
    system prompt. The summariser defaults to the rules (`RuleSummariser`); pass a
    `ChatSummariser` for a model's summary. `on_event` is called with each `Event`."""

    def __init__(
        self,
        model: str,
        hub: MemoryHub | None = None,
        *,
        window: int | None = None,
        windows: Mapping[str, int] | None = None,
        system: str | None = None,
        thresholds: Thresholds | None = None,
        flush: FlushPolicy | None = None,
        summariser: Summariser | None = None,
        counter: TokenCounter | Callable[[str], int] | None = None,
        on_event: Callable[[Event], None] | None = None,
    ) -> None:
        resolved = window or window_of(model, windows)
        if resolved is None:
            raise ValueError(f"unknown context window for {model!r}: pass window=")
        self.model = model
        self.hub = hub
        self.window = resolved
        self.thresholds = thresholds or Thresholds()
        self.flush_policy = flush or FlushPolicy()
        self.summariser: Summariser = summariser or RuleSummariser()
        if counter is None:
            self.counter: TokenCounter = counter_for(model)
        elif callable(counter) and not hasattr(counter, "count"):
            self.counter = CallableCounter(counter)
        else:
            self.counter = counter  # type: ignore[assignment]
        self.on_event = on_event
        self.events: list[Event] = []
        self._system: list[tuple[dict[str, Any], int]] = []
        self._memory: tuple[dict[str, Any], int] | None = None
        self._summary: tuple[dict[str, Any], int] | None = None
        self._turns: list[_Turn] = []
        self._turn_tokens = 0
        self._warned = False
        if system:
            self.add({"role": "system", "content": system})

    # ----- what the model sees -----

    @property
    def tokens(self) -> int:
        """The context's tokens as the model will count them (with the reply's priming)."""
        pinned = sum(tokens for _, tokens in self._system)
        pinned += sum(pair[1] for pair in (self._memory, self._summary) if pair is not None)
        return pinned + self._turn_tokens + TOKENS_PRIMING_REPLY

    @property
    def usage(self) -> float:
        """The share of the window in use."""
        return self.tokens / self.window

    @property
    def summary(self) -> str:
        """The summary of the folded turns ("" before any compaction)."""
        return str(self._summary[0]["content"]).removeprefix(SUMMARY_HEADING).strip() if self._summary else ""

    def messages(self) -> list[dict[str, Any]]:
        """The context to send: the system prompt, the memory block and the summary (as
        system messages), then the turns, oldest first."""
        pinned = [message for message, _ in self._system]
        pinned += [pair[0] for pair in (self._memory, self._summary) if pair is not None]
        return [dict(message) for message in [*pinned, *(m for turn in self._turns for m in turn.messages)]]

    # ----- what goes in -----

    def inject_memory(
        self, *, project: str | None = None, query: str | None = None, max_tokens: int | None = None
    ) -> str:
        """Fetch the team's memory block (`hub.context`) and pin it after the system
        prompt, replacing the one before. Fails open: when the server cannot answer, the
        context goes on without it (an event says why). Answers the block's text."""
        if self.hub is None:
            return ""
        before = self.tokens
        try:
            text = self.hub.context(project=project, query=query, max_tokens=max_tokens)["text"]
        except MemoryHubError as exc:
            self._emit(Event("memory_unavailable", before, before, detail=str(exc)))
            return ""
        self.set_memory(text)
        return text

    def set_memory(self, text: str) -> None:
        """Pin `text` as the memory block (replacing the one before; "" removes it)."""
        if not text.strip():
            self._memory = None
            return
        message = {"role": "system", "content": f"{MEMORY_HEADING}\n\n{text.strip()}"}
        self._memory = (message, message_tokens(message, self.counter))

    def add(self, message: Message) -> list[Event]:
        """Add one chat message (OpenAI's shape: `role`, `content`, `tool_calls`,
        `tool_call_id`; Anthropic's content parts are understood too), then run the
        thresholds. Answers the events this caused."""
        stored = dict(message)
        tokens = message_tokens(stored, self.counter)
        role = stored.get("role")
        if role == "system" and not self._turns:
            self._system.append((stored, tokens))
            return self.check()
        answered = _answered_ids(stored)
        last = self._turns[-1] if self._turns else None
        if answered and last is not None and answered <= last.tool_ids:
            last.messages.append(stored)
            last.tokens += tokens
        else:
            self._turns.append(_Turn([stored], tokens, _call_ids(stored)))
        self._turn_tokens += tokens
        return self.check()

    def extend(self, messages: Iterable[Message]) -> list[Event]:
        """`add` each message; answers all the events."""
        events: list[Event] = []
        for message in messages:
            events += self.add(message)
        return events

    # ----- the thresholds -----

    def check(self) -> list[Event]:
        """Run the thresholds on the context as it is (`add` does)."""
        made: list[Event] = []
        limits = self.thresholds
        if self.usage >= limits.flush and self.flush_policy.enabled:
            made += self._flush(self._foldable(), forced=False)
        if self.usage >= limits.compact:
            made += self._compact()
        if self.usage >= limits.warn:
            if not self._warned:
                self._warned = True
                logger.warning(
                    "context of %s at %.0f%% of its %d-token window",
                    self.model,
                    100 * self.usage,
                    self.window,
                )
                made.append(self._emit(Event("warned", self.tokens, self.tokens, detail=f"{self.usage:.0%}")))
        else:
            self._warned = False
        if self.usage >= limits.prune:
            made += self._prune()
        return made

    def flush_all(self) -> list[Event]:
        """Flush every turn not flushed yet, the newest too (at the end of a session)."""
        return self._flush(list(self._turns), forced=True) if self.flush_policy.enabled else []

    def clear(self, *, flush: bool = True) -> list[Event]:
        """Forget the turns and the summary, after flushing the turns not written yet
        (`flush=False`: without); the system prompt and the memory block stay."""
        made = self.flush_all() if flush else []
        self._turns = []
        self._turn_tokens = 0
        self._summary = None
        self._warned = False
        return made

    def _foldable(self) -> list[_Turn]:
        """The turns older than the newest `keep_recent`."""
        return self._turns[: max(0, len(self._turns) - self.thresholds.keep_recent)]

    def _flush(self, turns: Sequence[_Turn], *, forced: bool) -> list[Event]:
        pending = [turn for turn in turns if not turn.flushed]
        if not pending or self.hub is None:
            return []
        policy = self.flush_policy
        minimum = policy.min_tokens if policy.min_tokens is not None else int(0.05 * self.window)
        if not forced and sum(turn.tokens for turn in pending) < minimum:
            return []
        before = self.tokens
        drafts: list[str] = []
        entries: list[str] = []
        detail = ""
        try:
            for text, batch in self._transcripts(pending):
                if text:
                    answer = self.hub.extract_drafts(
                        text, source_session=self._source_session(), source="sdk"
                    )
                    made = answer["drafts"]
                    drafts += [draft["id"] for draft in made]
                    if policy.target == "entries":
                        saved, detail = self._accept(made)
                        entries += saved
                for turn in batch:
                    turn.flushed = True
        except MemoryHubError as exc:
            return [self._emit(Event("flush_failed", before, before, turns=len(pending), detail=str(exc)))]
        event = Event("flushed", before, self.tokens, len(pending), tuple(drafts), tuple(entries), detail)
        return [self._emit(event)]

    def _transcripts(self, turns: Sequence[_Turn]) -> list[tuple[str, list[_Turn]]]:
        """The turns as transcripts of at most MAX_TRANSCRIPT_CHARS (the commands' bound),
        cut between turns (a turn longer than that alone is cut by the server's limits)."""
        policy = self.flush_policy
        batches: list[tuple[str, list[_Turn]]] = []
        texts: list[str] = []
        batch: list[_Turn] = []
        size = 0
        for turn in turns:
            chosen = [m for m in turn.messages if m.get("role") in policy.roles or m.get("role") == "tool"]
            text = transcript_of(chosen, tool_results=policy.tool_results)
            if batch and size + len(text) > MAX_TRANSCRIPT_CHARS:
                batches.append(("\n\n".join(texts), batch))
                texts, batch, size = [], [], 0
            if text:
                texts.append(text[:MAX_TRANSCRIPT_CHARS])
                size += len(text) + 2
            batch.append(turn)
        if batch:
            batches.append(("\n\n".join(texts), batch))
        return batches

    def _accept(self, drafts: Sequence[Mapping[str, Any]]) -> tuple[list[str], str]:
        saved: list[str] = []
        if self.hub is None:
            return saved, ""
        for draft in drafts:
            if draft.get("conflict"):
                continue  # a duplicate or a contradiction is for a person to review
            try:
                accepted = self.hub.accept_draft(draft["id"])
            except Forbidden:
                return saved, "the token may not save entries: the rest stay drafts"
            except Conflict:
                continue
            entry = accepted.get("memory_entry")
            if entry:
                saved.append(entry["key"])
        return saved, ""

    def _source_session(self) -> str:
        label = (
            self.flush_policy.source_session or (self.hub.session if self.hub else None) or "context-manager"
        )
        return label[:MAX_SOURCE_SESSION_CHARS]

    def _compact(self) -> list[Event]:
        limits = self.thresholds
        foldable = self._foldable()
        if not foldable:
            return []
        budget = max(1, int(limits.summary_share * self.window))
        target = limits.compact_to * self.window
        fold: list[_Turn] = []
        remaining = self.tokens - (self._summary[1] if self._summary else 0) + budget
        for turn in foldable:
            if remaining <= target:
                break
            fold.append(turn)
            remaining -= turn.tokens
        made: list[Event] = []
        if self.flush_policy.enabled and self.hub is not None and any(not turn.flushed for turn in fold):
            made += self._flush(fold, forced=True)
            if any(not turn.flushed for turn in fold):
                made.append(
                    self._emit(
                        Event(
                            "compaction_deferred",
                            self.tokens,
                            self.tokens,
                            len(fold),
                            detail="the turns were not written to MemoryHub: kept until they are",
                        )
                    )
                )
                return made
        before = self.tokens
        text = self.summariser.summarise(
            [message for turn in fold for message in turn.messages],
            previous=self.summary,
            max_tokens=budget,
            counter=self.counter,
        )
        self._drop(fold)
        message = {"role": "system", "content": f"{SUMMARY_HEADING}\n{text}"}
        self._summary = (message, message_tokens(message, self.counter))
        made.append(self._emit(Event("compacted", before, self.tokens, len(fold))))
        return made

    def _prune(self) -> list[Event]:
        target = self.thresholds.prune_to * self.window
        drop: list[_Turn] = []
        remaining = self.tokens
        for turn in self._turns[:-1]:  # never the newest turn
            if remaining <= target:
                break
            drop.append(turn)
            remaining -= turn.tokens
        made: list[Event] = []
        if self.flush_policy.enabled:
            made += self._flush(drop, forced=True)  # a failure is its event; the prune goes on
        before = self.tokens
        self._drop(drop)
        dropped_summary = self._summary is not None and self.tokens > target
        if dropped_summary:
            self._summary = None
        detail = "the summary was dropped too" if dropped_summary else ""
        if drop or dropped_summary:
            made.append(self._emit(Event("pruned", before, self.tokens, len(drop), detail=detail)))
        return made

    def _drop(self, turns: Sequence[_Turn]) -> None:
        gone = {id(turn) for turn in turns}
        self._turns = [turn for turn in self._turns if id(turn) not in gone]
        self._turn_tokens = sum(turn.tokens for turn in self._turns)

    def _emit(self, event: Event) -> Event:
        self.events.append(event)
        if self.on_event is not None:
            self.on_event(event)
        return event


def _call_ids(message: Mapping[str, Any]) -> set[str]:
    """The tool calls a message makes (OpenAI's `tool_calls`, Anthropic's `tool_use` parts)."""
    ids = {str(call.get("id")) for call in message.get("tool_calls") or [] if isinstance(call, Mapping)}
    content = message.get("content")
    if isinstance(content, list):
        ids |= {
            str(part.get("id"))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "tool_use"
        }
    return ids


def _answered_ids(message: Mapping[str, Any]) -> set[str]:
    """The tool calls a message answers (a `tool` message's `tool_call_id`, Anthropic's
    `tool_result` parts); empty for any other message."""
    if message.get("role") == "tool" and message.get("tool_call_id") is not None:
        return {str(message["tool_call_id"])}
    content = message.get("content")
    if isinstance(content, list) and content:
        results = [
            part for part in content if isinstance(part, Mapping) and part.get("type") == "tool_result"
        ]
        if results and len(results) == len(content):
            return {str(part.get("tool_use_id")) for part in results}
    return set()


def _part_type(part: Any) -> Any:
    return part.get("type") if isinstance(part, Mapping) else None
