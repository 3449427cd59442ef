"""The team's vault secrets as one compiled matcher, for what leaves the service.

Content, notes and metadata are scrubbed of credential shapes and of the vault's
secrets when they are written. What a read must still catch is a secret that entered
the vault after the text was written; one pass of one compiled alternation per string
does that. The matcher is cached per team and rebuilt when the team's vault changes: the
team row's `vault_version`, moved by a trigger on every write of a vault entry (teams.0015),
tells, in every process, whether the cached one is current. An API read passes the
version its authentication read with the team's row, which spares the request the query
(teams.calls.AgentCall.vault_version).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from teams.models import Team
from teams.scrubber import SecretMatcher
from teams.selectors import team_secret_values

# Bounds the memory the cache holds; a team pushed out simply rebuilds on its next read.
MAX_CACHED_TEAMS = 256

_cache: OrderedDict[int, tuple[int, SecretMatcher]] = OrderedDict()
_lock = threading.Lock()


def team_secret_matcher(*, team_id: int, vault_version: int | None = None) -> SecretMatcher:
    """The matcher of the team's current secret values. Reads the team's vault version
    (one query) unless the caller read it in this transaction and passes it; decrypts
    the vault only when it changed since the cached matcher was built. Call it inside
    the team's scope (row-level security hides the vault otherwise)."""
    stamp = _vault_version(team_id) if vault_version is None else vault_version
    with _lock:
        cached = _cache.get(team_id)
        if cached is not None and cached[0] == stamp:
            _cache.move_to_end(team_id)
            return cached[1]
    matcher = SecretMatcher(team_secret_values(team_id=team_id))
    with _lock:
        _cache[team_id] = (stamp, matcher)
        _cache.move_to_end(team_id)
        while len(_cache) > MAX_CACHED_TEAMS:
            _cache.popitem(last=False)
    return matcher


def _vault_version(team_id: int) -> int:
    version = Team.objects.filter(id=team_id).values_list("vault_version", flat=True).first()
    # A team that is gone has no secrets; -1 is never a version a matcher was built at.
    return -1 if version is None else int(version)
