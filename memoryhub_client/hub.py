"""`MemoryHub` and `AsyncMemoryHub`: one team's memory on one server, over the REST API.

Each method is an operation of operations.py or fact_operations.py (its arguments and
docstring are there), sent by transport.py; the two classes differ only in how they wait for the answer."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx

from memoryhub_client import fact_operations, operations
from memoryhub_client.config import load_config
from memoryhub_client.errors import error_from_answer, json_object
from memoryhub_client.operations import VAULT_PASSPHRASE_HEADER, Page
from memoryhub_client.transport import (
    DEFAULT_TIMEOUT_SECONDS,
    Call,
    Connection,
    RetryPolicy,
    json_answer,
    send,
    send_async,
)
from memoryhub_client.types import MemoryOutput

P = ParamSpec("P")
T = TypeVar("T")
EXPORT_TIMEOUT_SECONDS = 600.0


def _sync(build: Callable[P, Call[T]]) -> Callable[Concatenate[MemoryHub, P], T]:
    @functools.wraps(build)
    def method(self: MemoryHub, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._send(build(*args, **kwargs))

    return method


def _async(build: Callable[P, Call[T]]) -> Callable[Concatenate[AsyncMemoryHub, P], Coroutine[Any, Any, T]]:
    @functools.wraps(build)
    async def method(self: AsyncMemoryHub, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._send(build(*args, **kwargs))

    return method


class _Hub:
    """What both clients share: the connection and its settings."""

    _connection: Connection

    def _connect(
        self,
        url: str,
        token: str,
        team: str,
        session: str | None,
        timeout: float,
        retry: RetryPolicy | None,
    ) -> None:
        self._connection = Connection(
            url=url, team=team, token=token, session=session, timeout=timeout, retry=retry or RetryPolicy()
        )

    def __repr__(self) -> str:  # the token never shows
        return f"{type(self).__name__}(url={self.url!r}, team={self.team!r})"

    @property
    def url(self) -> str:
        """The server's root URL."""
        return self._connection.url

    @property
    def team(self) -> str:
        """The team's slug: every call is about this team."""
        return self._connection.team

    @property
    def session(self) -> str | None:
        """The agent session whose heartbeat every call is (sent as `X-MemoryHub-Session`);
        set it to the id `start_session` answered, or None."""
        return self._connection.session

    @session.setter
    def session(self, value: str | None) -> None:
        self._connection.session = value

    def _export_call(self, with_vault: bool, vault_passphrase: str | None) -> Call[Any]:
        headers = {VAULT_PASSPHRASE_HEADER: vault_passphrase} if vault_passphrase is not None else None
        params = {"with_vault": "true"} if with_vault else None
        return Call(
            "GET", "export/", json_answer, params=params, headers=headers, timeout=EXPORT_TIMEOUT_SECONDS
        )


class MemoryHub(_Hub):
    """A client of one team's memory on a MemoryHub server:
    `MemoryHub("https://memory.example", token, team="acme")`.

    `token` is an agent token of the team (`mh_...`; sent as a bearer header, never shown).
    Calls that the server refuses raise a `MemoryHubError` subclass carrying its error code;
    429 and 503 answers with `Retry-After` are retried as `retry` says (`RetryPolicy`; pass
    `RetryPolicy(attempts=1)` for none). `session` makes every call the heartbeat of that
    agent session. `transport` is httpx's, for a proxy or a test. Close it with `close()`
    or use it as a context manager."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        team: str,
        session: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._connect(url, token, team, session, timeout, retry)
        self._http = httpx.Client(transport=transport, **self._connection.client_options())

    @classmethod
    def from_environment(cls, **options: Any) -> MemoryHub:
        """The server, team and token the `memoryhub` command would use: MEMORYHUB_URL,
        MEMORYHUB_TEAM and MEMORYHUB_TOKEN, then `~/.config/memoryhub/config.toml`."""
        config = load_config()
        return cls(config.url, config.require_token(), team=config.require_team(), **options)

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> MemoryHub:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _send(self, call: Call[T]) -> T:
        return send(self._http, self._connection, call)

    save = _sync(operations.save)
    save_batch = _sync(operations.save_batch)
    get = _sync(operations.get)
    get_version = _sync(operations.get_version)
    list = _sync(operations.list_memories)
    history = _sync(operations.history)
    delete = _sync(operations.delete)
    confirm = _sync(operations.confirm)
    unsupersede = _sync(operations.unsupersede)
    archive = _sync(operations.archive)
    restore = _sync(operations.restore)
    search = _sync(operations.search)
    context = _sync(operations.context)
    nudges = _sync(operations.nudges)
    resolve_nudge = _sync(operations.resolve_nudge)
    drafts = _sync(operations.drafts)
    get_draft = _sync(operations.get_draft)
    extract_drafts = _sync(operations.extract_drafts)
    accept_draft = _sync(operations.accept_draft)
    reject_draft = _sync(operations.reject_draft)
    merge_draft = _sync(operations.merge_draft)
    start_session = _sync(operations.start_session)
    update_session = _sync(operations.update_session)
    end_session = _sync(operations.end_session)
    get_session = _sync(operations.get_session)
    sessions = _sync(operations.sessions)
    anchors = _sync(operations.anchors)
    report_file_anchors = _sync(operations.report_file_anchors)
    fact_set = _sync(fact_operations.fact_set)
    fact_get = _sync(fact_operations.fact_get)
    facts = _sync(fact_operations.facts)
    fact_history = _sync(fact_operations.fact_history)
    fact_delete = _sync(fact_operations.fact_delete)
    import_export_file = _sync(operations.import_export_file)
    request = _sync(operations.raw)

    def iter_memories(self, **filters: Any) -> Iterator[MemoryOutput]:
        """Every active memory, page after page (the filters of `list`)."""
        cursor: str | None = None
        while True:
            page: Page[MemoryOutput] = self.list(**filters, cursor=cursor)
            yield from page.results
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    @contextlib.contextmanager
    def export(
        self, *, with_vault: bool = False, vault_passphrase: str | None = None
    ) -> Iterator[Iterator[bytes]]:
        """The team's whole memory as JSON Lines (admin token), streamed a line at a time:
        `with hub.export() as lines: for line in lines: ...`. The last line is the
        `{"record": "end", ...}` trailer; an export without it was cut short."""
        call = self._export_call(with_vault, vault_passphrase)
        try:
            with self._http.stream(call.method, call.path, **self._connection.request(call)) as response:
                if not response.is_success:
                    response.read()
                    raise error_from_answer(
                        response.status_code, json_object(response.content), response.headers
                    )
                yield lines_of(response.iter_bytes())
        except httpx.HTTPError as exc:
            raise self._connection.unreachable(exc) from None


class AsyncMemoryHub(_Hub):
    """`MemoryHub` for asyncio: the same methods, awaited (`await hub.search("...")`),
    over httpx.AsyncClient. Close it with `await hub.aclose()` or `async with`."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        team: str,
        session: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._connect(url, token, team, session, timeout, retry)
        self._http = httpx.AsyncClient(transport=transport, **self._connection.client_options())

    @classmethod
    def from_environment(cls, **options: Any) -> AsyncMemoryHub:
        """As `MemoryHub.from_environment`."""
        config = load_config()
        return cls(config.url, config.require_token(), team=config.require_team(), **options)

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryHub:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _send(self, call: Call[T]) -> T:
        return await send_async(self._http, self._connection, call)

    save = _async(operations.save)
    save_batch = _async(operations.save_batch)
    get = _async(operations.get)
    get_version = _async(operations.get_version)
    list = _async(operations.list_memories)
    history = _async(operations.history)
    delete = _async(operations.delete)
    confirm = _async(operations.confirm)
    unsupersede = _async(operations.unsupersede)
    archive = _async(operations.archive)
    restore = _async(operations.restore)
    search = _async(operations.search)
    context = _async(operations.context)
    nudges = _async(operations.nudges)
    resolve_nudge = _async(operations.resolve_nudge)
    drafts = _async(operations.drafts)
    get_draft = _async(operations.get_draft)
    extract_drafts = _async(operations.extract_drafts)
    accept_draft = _async(operations.accept_draft)
    reject_draft = _async(operations.reject_draft)
    merge_draft = _async(operations.merge_draft)
    start_session = _async(operations.start_session)
    update_session = _async(operations.update_session)
    end_session = _async(operations.end_session)
    get_session = _async(operations.get_session)
    sessions = _async(operations.sessions)
    anchors = _async(operations.anchors)
    report_file_anchors = _async(operations.report_file_anchors)
    fact_set = _async(fact_operations.fact_set)
    fact_get = _async(fact_operations.fact_get)
    facts = _async(fact_operations.facts)
    fact_history = _async(fact_operations.fact_history)
    fact_delete = _async(fact_operations.fact_delete)
    import_export_file = _async(operations.import_export_file)
    request = _async(operations.raw)

    async def iter_memories(self, **filters: Any) -> AsyncIterator[MemoryOutput]:
        """Every active memory, page after page (the filters of `list`)."""
        cursor: str | None = None
        while True:
            page: Page[MemoryOutput] = await self.list(**filters, cursor=cursor)
            for memory in page.results:
                yield memory
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    @contextlib.asynccontextmanager
    async def export(
        self, *, with_vault: bool = False, vault_passphrase: str | None = None
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """As `MemoryHub.export`: `async with hub.export() as lines: async for line in lines`."""
        call = self._export_call(with_vault, vault_passphrase)
        try:
            async with self._http.stream(
                call.method, call.path, **self._connection.request(call)
            ) as response:
                if not response.is_success:
                    await response.aread()
                    raise error_from_answer(
                        response.status_code, json_object(response.content), response.headers
                    )
                yield alines_of(response.aiter_bytes())
        except httpx.HTTPError as exc:
            raise self._connection.unreachable(exc) from None


class _LineSplitter:
    """Cuts chunks of bytes into lines, looking at each byte once (a long line arriving in
    many chunks is joined once, when its end comes)."""

    def __init__(self) -> None:
        self._pending: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        *complete, rest = chunk.split(b"\n")
        lines = []
        if complete:
            complete[0] = b"".join([*self._pending, complete[0]])
            self._pending = []
            lines = [line for line in complete if line]
        if rest:
            self._pending.append(rest)
        return lines

    def end(self) -> list[bytes]:
        last = b"".join(self._pending)
        return [last] if last else []


def lines_of(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The non-empty lines of a stream of bytes, without their line breaks."""
    splitter = _LineSplitter()
    for chunk in chunks:
        yield from splitter.feed(chunk)
    yield from splitter.end()


async def alines_of(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """`lines_of` for an async stream."""
    splitter = _LineSplitter()
    async for chunk in chunks:
        for line in splitter.feed(chunk):
            yield line
    for line in splitter.end():
        yield line
