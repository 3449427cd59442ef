"""The one HTTP layer of the client: a `Call` says what to send and how to read the
answer; `send` (httpx.Client) and `send_async` (httpx.AsyncClient) send it, turn a failure
into a `MemoryHubError` and retry only where the server says to (`RetryPolicy`).

Everything that talks to the REST API goes through here: the SDK's methods, the commands
(through the SDK) and the streamed export and import (`Connection.stream`)."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from memoryhub_client.config import server_base
from memoryhub_client.errors import (
    MemoryHubError,
    RateLimited,
    ServerUnavailable,
    ServerUnreachable,
    UnexpectedAnswer,
    error_from_answer,
    json_object,
)

T = TypeVar("T")

USER_AGENT = "memoryhub-client/0.1"
SESSION_HEADER = "X-MemoryHub-Session"
DEFAULT_TIMEOUT_SECONDS = 30.0


def json_answer(response: httpx.Response) -> Any:
    """A success's JSON object (an empty dict for 204 No Content)."""
    if response.status_code == 204:
        return {}
    body = json_object(response.content)
    if body is None:
        raise UnexpectedAnswer(
            f"unexpected answer from {response.request.url.host} ({response.status_code}, not JSON)",
            status=response.status_code,
        )
    return body


def no_answer(response: httpx.Response) -> None:
    """For calls whose success has no body (204)."""
    return None


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request to the team's API: `path` is relative to `/api/v1/teams/{team}/`;
    `read` turns the successful response into the result."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]
    params: Mapping[str, str] | None = None
    json: Any = None
    content: bytes | None = None
    headers: Mapping[str, str] | None = None
    timeout: float | None = None


@dataclass(frozen=True)
class RetryPolicy:
    """When a call is sent again: only on 429 and 503 answers that say when (`Retry-After`
    or the body's `retry_after`), at most `attempts` tries in all, and never when the
    server asks for a wait longer than `max_wait` seconds (the error is raised at once, its
    `retry_after` telling the caller). The wait is the server's, or a backoff of `backoff`
    seconds doubling with each retry when that is longer, plus up to 10 % jitter so that
    many clients refused together do not come back together. Nothing else is retried: a
    connection failure or another status is raised as it is."""

    attempts: int = 3
    max_wait: float = 30.0
    backoff: float = 0.5
    # How a wait is waited: time.sleep (asyncio.sleep for AsyncMemoryHub) unless given.
    sleep: Callable[[float], None] | None = None

    def should_retry(self, error: BaseException) -> bool:
        """Whether the call that raised `error` is sent again."""
        return (
            isinstance(error, RateLimited | ServerUnavailable)
            and error.retry_after is not None
            and error.retry_after <= self.max_wait
        )

    def wait_seconds(self, error: BaseException | None, retry_number: int) -> float:
        """The wait before retry `retry_number` (1 for the first)."""
        asked = getattr(error, "retry_after", None) or 0.0
        wait = max(float(asked), self.backoff * 2 ** (retry_number - 1))
        return min(self.max_wait, wait * (1 + random.uniform(0, 0.1)))  # noqa: S311 (jitter, not a secret)

    def _wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        return self.wait_seconds(error, state.attempt_number)

    def _retrying(self) -> Retrying:
        options: dict[str, Any] = {"sleep": self.sleep} if self.sleep is not None else {}
        return Retrying(
            retry=retry_if_exception(self.should_retry),
            stop=stop_after_attempt(max(1, self.attempts)),
            wait=self._wait,
            reraise=True,
            **options,
        )

    def _retrying_async(self) -> AsyncRetrying:
        options: dict[str, Any] = {}
        if self.sleep is not None:
            sleep = self.sleep

            async def sleep_async(seconds: float) -> None:
                sleep(seconds)

            options["sleep"] = sleep_async
        return AsyncRetrying(
            retry=retry_if_exception(self.should_retry),
            stop=stop_after_attempt(max(1, self.attempts)),
            wait=self._wait,
            reraise=True,
            **options,
        )


NO_RETRY = RetryPolicy(attempts=1)


@dataclass
class Connection:
    """Where the calls go and what every one of them carries: the server, the team, the
    token (as a bearer header, never in a message or a repr) and the session whose
    heartbeat each call is."""

    url: str
    team: str
    token: str = field(repr=False)
    session: str | None = None
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def __post_init__(self) -> None:
        self.url = server_base(self.url)
        if not self.team:
            raise ValueError("a team is needed: MemoryHub(url, token, team='my-team')")
        if not self.token:
            raise ValueError("a token is needed: the agent token, e.g. from MEMORYHUB_TOKEN")

    @property
    def team_url(self) -> str:
        return f"{self.url}/api/v1/teams/{quote(self.team, safe='')}/"

    def client_options(self) -> dict[str, Any]:
        return {
            "base_url": self.team_url,
            "headers": {"Authorization": f"Bearer {self.token}", "User-Agent": USER_AGENT},
            "timeout": self.timeout,
        }

    def request(self, call: Call[Any]) -> dict[str, Any]:
        headers = dict(call.headers or {})
        if self.session:
            headers[SESSION_HEADER] = self.session
        options: dict[str, Any] = {"params": dict(call.params or {}), "headers": headers}
        if call.json is not None:
            options["json"] = call.json
        if call.content is not None:
            options["content"] = call.content
        if call.timeout is not None:
            options["timeout"] = call.timeout
        return options

    def read(self, call: Call[T], response: httpx.Response) -> T:
        if not response.is_success:
            raise error_from_answer(response.status_code, json_object(response.content), response.headers)
        return call.read(response)

    def unreachable(self, exc: httpx.HTTPError) -> MemoryHubError:
        # httpx's messages name the URL and the cause, never the headers.
        return ServerUnreachable(f"cannot reach {self.url}: {type(exc).__name__}: {exc}")


def send(http: httpx.Client, connection: Connection, call: Call[T]) -> T:
    """Send `call` (again, where the retry policy says), and read its answer."""
    for attempt in connection.retry._retrying():
        with attempt:
            try:
                response = http.request(call.method, call.path, **connection.request(call))
            except httpx.HTTPError as exc:
                raise connection.unreachable(exc) from None
            return connection.read(call, response)
    raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover


async def send_async(http: httpx.AsyncClient, connection: Connection, call: Call[T]) -> T:
    """`send` for httpx.AsyncClient."""
    async for attempt in connection.retry._retrying_async():
        with attempt:
            try:
                response = await http.request(call.method, call.path, **connection.request(call))
            except httpx.HTTPError as exc:
                raise connection.unreachable(exc) from None
            return connection.read(call, response)
    raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover
