"""The client's address, for per-address limits (API throttles, dashboard lockout).

Only the proxies MemoryHub is told about are trusted: behind N of them
(MEMORYHUB_PROXY_COUNT), the client is the address the outermost one appended to
X-Forwarded-For; otherwise it is the socket's peer and X-Forwarded-For is ignored, since
any client may send one."""

from __future__ import annotations

from typing import Any

from django.conf import settings


def client_address(request: Any) -> str:
    """Also django-axes' AXES_CLIENT_IP_CALLABLE, so lockouts and throttles agree."""
    meta = request.META
    peer: str = meta.get("REMOTE_ADDR") or ""
    proxies: int = settings.MEMORYHUB_PROXY_COUNT
    header: str = meta.get("HTTP_X_FORWARDED_FOR", "")
    forwarded = [hop.strip() for hop in header.split(",") if hop.strip()]
    if proxies <= 0 or not forwarded:
        return peer
    # Each trusted proxy appends the address it received from; entries further left
    # were written by the client itself.
    return forwarded[-min(proxies, len(forwarded))]
