"""Which URLs a `url` or `api` anchor may hold: one rule, used by every save (REST, batch,
MCP: memories.anchors.normalise_anchor) and by the anchor check itself
(freshness.anchor_http, for the anchor and for every redirect it follows), so a saved
anchor is one the check can check and the two can never drift apart
(docs/freshness.md, "Anchors").

The URL is parsed by httpx, the library the check fetches with, and a request is built
from it as the check builds one; then it is held to:

- at most MAX_URL_CHARS characters, no whitespace or control characters;
- http or https, a host, no user name or password, a port from 1 to 65535 when given;
- a host that is a DNS name (labels of letters, digits, `-` and `_`, at most 63 long, none
  empty, none starting or ending with `-`; non-ASCII names must pass IDNA), a canonical
  dotted-quad IPv4 address, or a bracketed IPv6 address without a zone;
- a host ending in a number (`2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1`) is refused
  unless it is a canonical dotted quad: resolvers read these forms as addresses
  (inet_aton), URL parsers disagree about them, and they are the usual way past an
  address filter;
- an address literal is judged by the SSRF policy (`address_allowed`, with the operator's
  MEMORYHUB_ANCHOR_ALLOWED_NETWORKS). A name is judged when the check resolves it: a save
  does no DNS lookup (it would wait on DNS, and tell a caller which internal names exist).

No regular expression runs on the value: it is parsed, then checked character by
character with bounded lengths.
"""

from __future__ import annotations

import ipaddress
import string
from collections.abc import Iterable, Sequence

import httpx

MAX_URL_CHARS = 2000
MAX_HOST_CHARS = 253
MAX_LABEL_CHARS = 63
HTTP_SCHEMES = ("http", "https")
_LABEL_CHARACTERS = frozenset(string.ascii_lowercase + string.digits + "-_")
_HEX_DIGITS = frozenset(string.hexdigits)

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class AnchorURLRefused(ValueError):
    """Why an anchor check cannot fetch a URL. `blocked`: only the address policy
    refuses it (an operator could allow its network)."""

    def __init__(self, reason: str, *, blocked: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.blocked = blocked


# --------------------------------------------------------------------------- the address policy


def parse_networks(values: Iterable[str]) -> tuple[IPNetwork, ...]:
    """The operator's allow-list, CIDRs or single addresses; a bad entry raises ValueError."""
    return tuple(ipaddress.ip_network(value.strip(), strict=False) for value in values if value.strip())


def allowed_networks_setting() -> tuple[IPNetwork, ...]:
    from django.conf import settings

    return parse_networks(settings.MEMORYHUB_ANCHOR_ALLOWED_NETWORKS)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    return None


_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def address_allowed(address: IPAddress, allowed_networks: Sequence[IPNetwork] = ()) -> bool:
    """Whether a check may connect to `address`: a public unicast address, or one in a
    network the operator allows. IPv6 forms embedding an IPv4 address are judged by it."""
    candidates: list[IPAddress] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            candidates.append(embedded)
    if any(c in network for c in candidates for network in allowed_networks if c.version == network.version):
        return True
    for candidate in candidates:
        if (
            candidate.is_loopback
            or candidate.is_private
            or candidate.is_link_local
            or candidate.is_multicast
            or candidate.is_reserved
            or candidate.is_unspecified
            or not candidate.is_global
        ):
            return False
        if isinstance(candidate, ipaddress.IPv6Address) and (
            candidate.teredo is not None or candidate in _NAT64 or candidate in _IPV4_COMPATIBLE
        ):
            return False
    return True


# --------------------------------------------------------------------------- the URL


def vetted_anchor_url(
    value: str, *, allowed_networks: Sequence[IPNetwork] | None = None, limit_length: bool = True
) -> httpx.URL:
    """The URL an anchor check fetches for `value`, parsed as the check parses it; raises
    AnchorURLRefused saying why the check could not or may not fetch it (the module
    docstring). `allowed_networks`: the operator's (the setting when None).
    `limit_length` is off for a redirect's target, which the anchor does not store."""
    if not isinstance(value, str):
        raise AnchorURLRefused("the URL must be a string")
    if limit_length and len(value) > MAX_URL_CHARS:
        raise AnchorURLRefused(f"the URL is limited to {MAX_URL_CHARS} characters")
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise AnchorURLRefused("a URL has no whitespace or control characters")
    try:
        url = httpx.URL(value)
        raw_host = url.raw_host  # IDNA-encodes a non-ASCII name
        port = url.port
    except UnicodeError:  # idna's IDNAError, for a name IDNA refuses
        raise AnchorURLRefused("the host is not a valid internationalised domain name") from None
    except (httpx.InvalidURL, ValueError) as exc:
        raise AnchorURLRefused(f"not a valid URL ({str(exc)[:120]})") from None
    if url.scheme not in HTTP_SCHEMES or not raw_host:
        raise AnchorURLRefused("a url or api anchor is an http:// or https:// URL with a host")
    if url.userinfo:
        raise AnchorURLRefused("an anchor URL carries no user name or password")
    if port is not None and not 1 <= port <= 65535:
        raise AnchorURLRefused("the port must be from 1 to 65535")
    address = _host_address(raw_host.decode("ascii", errors="replace"))
    if address is not None:
        networks = allowed_networks_setting() if allowed_networks is None else allowed_networks
        if not address_allowed(address, networks):
            raise AnchorURLRefused(
                "the host's address is not public (loopback, private, link-local and the like), so "
                "anchor checks may not reach it unless an operator allows its network",
                blocked=True,
            )
    try:
        httpx.Request("GET", url)  # what the check sends: building it must not fail
    except (httpx.InvalidURL, ValueError) as exc:
        raise AnchorURLRefused(f"not a valid URL ({str(exc)[:120]})") from None
    return url


def host_and_port(url: httpx.URL) -> str:
    """`host:port` of a vetted URL, the port defaulted by scheme: what checks are
    limited and backed off by."""
    port = url.port or (443 if url.scheme == "https" else 80)
    return f"{url.raw_host.decode('ascii', errors='replace')}:{port}"


def _host_address(host: str) -> IPAddress | None:
    """The address a literal host names (None for a DNS name); refuses a host that is
    neither a well-formed name nor a canonical address literal."""
    if ":" in host:  # httpx took it from brackets: an IPv6 literal
        if "%" in host:
            raise AnchorURLRefused("an IPv6 address with a zone is not a URL a check can fetch")
        try:
            return ipaddress.IPv6Address(host)
        except ValueError:
            raise AnchorURLRefused("the host is not a valid IPv6 address") from None
    if len(host) > MAX_HOST_CHARS:
        raise AnchorURLRefused(f"the host is limited to {MAX_HOST_CHARS} characters")
    labels = host.split(".")
    last = labels[-1] if labels[-1] else labels[-2] if len(labels) > 1 else ""
    if _is_number(last):
        try:
            address = ipaddress.IPv4Address(host)
        except ValueError:
            address = None
        if address is None or str(address) != host:
            raise AnchorURLRefused(
                "the host ends in a number but is not a dotted-quad IPv4 address "
                "(octal, hexadecimal, integer and shortened forms are refused)"
            )
        return address
    name_labels = labels[:-1] if not labels[-1] and len(labels) > 1 else labels  # one trailing dot
    for label in name_labels:
        if not label or len(label) > MAX_LABEL_CHARS:
            raise AnchorURLRefused(
                f"the host's name has an empty label or one over {MAX_LABEL_CHARS} characters"
            )
        if not set(label) <= _LABEL_CHARACTERS or label[0] == "-" or label[-1] == "-":
            raise AnchorURLRefused("the host is not a valid name (letters, digits and inner hyphens only)")
    return None


def _is_number(label: str) -> bool:
    """What a resolver would read as part of an IPv4 address: decimal, or 0x hex."""
    if label.isascii() and label.isdigit():
        return True
    return label[:2] in ("0x", "0X") and set(label[2:]) <= _HEX_DIGITS
