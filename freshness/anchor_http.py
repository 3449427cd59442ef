"""Fetching a `url` or `api` anchor safely (docs/freshness.md, "Anchors").

- Before anything is resolved, the URL and each redirect's target are held to the anchor
  URL rule every save uses (memories.anchor_urls, which also holds the address policy):
  what a save would refuse is never fetched, it is a failed check saying why.
- SSRF guard: every connection goes through GuardedBackend, which resolves the host
  itself, refuses the whole host when any address it resolves to is not public
  (loopback, private, link-local with the cloud metadata address, CGNAT, multicast,
  reserved, unspecified, and IPv6 forms that embed one: IPv4-mapped, IPv4-compatible,
  6to4, NAT64, Teredo), unless the operator allows the network
  (MEMORYHUB_ANCHOR_ALLOWED_NETWORKS), and then connects to exactly the address it
  vetted: a DNS answer that changes between the check and the connection (rebinding)
  never reaches the socket. The peer the response came from is checked again
  (network_stream's server_addr) before its body is read. No proxy from the
  environment is used (trust_env=False): a proxy would connect on our behalf.
- One GET, redirects followed by hand (each hop's host vetted again at connection),
  at most MEMORYHUB_ANCHOR_MAX_REDIRECTS; connect and read timeouts (the name lookup
  within the connect timeout); the body read
  raw (no decompression: `Accept-Encoding: identity`) and at most MAX_BODY_BYTES, only
  when `expect` is a substring; an overall deadline per check.
- The outcome (CheckResult) carries a few words of why it failed, never the body.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as LookupTimeout
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from memories.anchor_urls import (
    AnchorURLRefused,
    IPNetwork,
    address_allowed,
    parse_networks,
    vetted_anchor_url,
)

MAX_BODY_BYTES = 256 * 1024
MAX_ADDRESSES = 8  # of a host's DNS answer, all vetted
USER_AGENT = "MemoryHub-anchor-check/1.0"


class BlockedAddress(Exception):
    """The host resolves to an address checks may not reach."""


class UnknownHost(Exception):
    """The host's name does not resolve."""


@dataclass(frozen=True)
class FetchPolicy:
    allowed_networks: tuple[IPNetwork, ...] = ()
    connect_timeout: float = 5.0
    read_timeout: float = 10.0
    max_redirects: int = 5
    deadline_seconds: float = 30.0

    @classmethod
    def from_settings(cls) -> FetchPolicy:
        from django.conf import settings

        return cls(
            allowed_networks=parse_networks(settings.MEMORYHUB_ANCHOR_ALLOWED_NETWORKS),
            connect_timeout=settings.MEMORYHUB_ANCHOR_CONNECT_TIMEOUT,
            read_timeout=settings.MEMORYHUB_ANCHOR_READ_TIMEOUT,
            max_redirects=settings.MEMORYHUB_ANCHOR_MAX_REDIRECTS,
            deadline_seconds=settings.MEMORYHUB_ANCHOR_CHECK_DEADLINE_SECONDS,
        )


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    status: int | None = None
    detail: str = ""
    duration_ms: int = 0
    # The host misbehaved (timeout, refused, 429, 5xx): it is backed off.
    host_trouble: bool = False


# Name lookups run on these threads so that a resolver that does not answer costs a
# check its connect timeout, not the system resolver's own (attempts x timeout x name
# servers). Few of them: a lookup that outlives its wait finishes in the background, and
# the lookups behind it wait their turn within their own timeout.
_RESOLVER = ThreadPoolExecutor(max_workers=4, thread_name_prefix="anchor-dns")
DEFAULT_LOOKUP_TIMEOUT = 5.0


def _resolve(host: str, port: int, timeout: float | None) -> list[Any]:
    wait = DEFAULT_LOOKUP_TIMEOUT if timeout is None else timeout
    lookup = _RESOLVER.submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    try:
        return lookup.result(timeout=wait)
    except LookupTimeout:
        lookup.cancel()
        raise httpcore.ConnectTimeout(f"no DNS answer for the host within {wait:g} s") from None


def vetted_address(
    host: str, port: int, allowed_networks: Sequence[IPNetwork], *, timeout: float | None = None
) -> str:
    """Resolve `host` (waiting at most `timeout` seconds) and answer the address to
    connect to; BlockedAddress when any of its addresses may not be reached, UnknownHost
    when it does not resolve, httpcore.ConnectTimeout when the resolver does not answer."""
    try:
        infos = _resolve(host, port, timeout)
    except (socket.gaierror, UnicodeError):
        raise UnknownHost(host) from None
    addresses: list[str] = []
    for info in infos[:MAX_ADDRESSES]:
        text = str(info[4][0]).split("%", 1)[0]  # an IPv6 scope id is no part of the address
        if not address_allowed(ipaddress.ip_address(text), allowed_networks):
            raise BlockedAddress(host)
        addresses.append(text)
    if not addresses:
        raise UnknownHost(host)
    return addresses[0]


class GuardedBackend(httpcore.SyncBackend):
    """httpcore's socket backend, connecting only to vetted addresses."""

    def __init__(self, allowed_networks: Sequence[IPNetwork]) -> None:
        self.allowed_networks = tuple(allowed_networks)

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        address = vetted_address(host, port, self.allowed_networks, timeout=timeout)
        return super().connect_tcp(
            address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )


class GuardedTransport(httpx.HTTPTransport):
    """httpx's transport over GuardedBackend, without proxies from the environment."""

    def __init__(self, policy: FetchPolicy) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=4,
            max_keepalive_connections=0,
            network_backend=GuardedBackend(policy.allowed_networks),
        )


def guarded_client(policy: FetchPolicy) -> httpx.Client:
    return httpx.Client(
        transport=GuardedTransport(policy),
        trust_env=False,
        follow_redirects=False,
        timeout=httpx.Timeout(
            policy.read_timeout, connect=policy.connect_timeout, pool=policy.connect_timeout
        ),
        headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity"},
    )


def check_anchor_url(
    client: httpx.Client, url: str, expect: int | str | None, policy: FetchPolicy
) -> CheckResult:
    """GET `url` and judge the answer: `expect` an int is the exact final status (a 3xx
    one is judged on the first answer, redirects not followed), a str a substring of the
    first MAX_BODY_BYTES of a 2xx body; no `expect`, a final 2xx or 3xx."""
    started = time.monotonic()

    def done(ok: bool, status: int | None, detail: str = "", *, trouble: bool = False) -> CheckResult:
        elapsed = int((time.monotonic() - started) * 1000)
        return CheckResult(ok=ok, status=status, detail=detail, duration_ms=elapsed, host_trouble=trouble)

    follow = not (isinstance(expect, int) and 300 <= expect < 400)
    try:
        target = vetted_anchor_url(url, allowed_networks=policy.allowed_networks)
    except AnchorURLRefused as refused:
        return done(
            False, None, "blocked address" if refused.blocked else f"invalid anchor: {refused.reason}"
        )
    try:
        request = client.build_request("GET", target)
        for _hop in range(policy.max_redirects + 1):
            response = client.send(request, stream=True)
            try:
                if not _peer_allowed(response, policy):
                    return done(False, None, "blocked address")
                status = response.status_code
                if follow and response.is_redirect and response.next_request is not None:
                    request = response.next_request
                    try:  # each hop is held to the anchor's own rule
                        vetted_anchor_url(
                            str(request.url), allowed_networks=policy.allowed_networks, limit_length=False
                        )
                    except AnchorURLRefused as refused:
                        if refused.blocked:
                            return done(False, None, "blocked address")
                        return done(False, status, f"redirect to a URL no check may fetch: {refused.reason}")
                    if time.monotonic() - started > policy.deadline_seconds:
                        return done(False, status, "timeout", trouble=True)
                    continue
                return _judge(response, expect, started, policy, done)
            finally:
                response.close()
        return done(False, None, "too many redirects")
    except BlockedAddress:
        return done(False, None, "blocked address")
    except UnknownHost:
        return done(False, None, "host not found")
    except httpx.TimeoutException:
        return done(False, None, "timeout", trouble=True)
    except httpx.ConnectError:
        return done(False, None, "connection failed", trouble=True)
    except (httpx.HTTPError, httpx.InvalidURL, ValueError):
        return done(False, None, "bad answer", trouble=True)


def _judge(
    response: httpx.Response, expect: int | str | None, started: float, policy: FetchPolicy, done: Any
) -> CheckResult:
    status = response.status_code
    trouble = status == 429 or status >= 500
    if isinstance(expect, int):
        if status == expect:
            return done(True, status)
        return done(False, status, f"expected status {expect}, got {status}", trouble=trouble)
    if status >= 400:
        return done(False, status, f"status {status}", trouble=trouble)
    if expect is None:
        return done(True, status)
    if not 200 <= status < 300:
        return done(False, status, f"status {status}")
    wanted = expect.encode()
    body = bytearray()
    for chunk in response.iter_raw():
        # Only the new bytes and the few before them can hold a match not seen yet.
        since = max(0, len(body) - len(wanted) + 1)
        body += chunk[: MAX_BODY_BYTES - len(body)]
        if body.find(wanted, since) >= 0:
            return done(True, status)
        if len(body) >= MAX_BODY_BYTES:
            break
        if time.monotonic() - started > policy.deadline_seconds:
            return done(False, status, "timeout", trouble=True)
    return done(False, status, "expected text missing")


def _peer_allowed(response: httpx.Response, policy: FetchPolicy) -> bool:
    """The address the answer came from, vetted again before its body is read."""
    stream = response.extensions.get("network_stream")
    peer = stream.get_extra_info("server_addr") if stream is not None else None
    if not peer:
        return False
    text = str(peer[0]).split("%", 1)[0]
    return address_allowed(ipaddress.ip_address(text), policy.allowed_networks)
