"""The team's vault secrets as one compiled matcher, for what leaves the service.

Content, notes and metadata are scrubbed of credential shapes and of the vault's
secrets when they are written. What a read must still catch is a secret that entered
the vault after the text was written; one pass of one compiled alternation per string
does that. The matcher is cached per team and rebuilt when the team's secret entries
change: a single aggregate (count and newest `updated_at` of its secret entries) tells,
in every process, whether the cached one is current. Any write adds or touches a row
(a newer `updated_at`) or removes one (a smaller count).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime

from django.db.models import Count, Max

from teams.models import VaultEntry
from teams.scrubber import SecretMatcher
from teams.selectors import team_secret_values

# Bounds the memory the cache holds; a team pushed out simply rebuilds on its next read.
MAX_CACHED_TEAMS = 256

_Stamp = tuple[int, datetime | None]
_cache: OrderedDict[int, tuple[_Stamp, SecretMatcher]] = OrderedDict()
_lock = threading.Lock()


def team_secret_matcher(*, team_id: int) -> SecretMatcher:
    """The matcher of the team's current secret values. Runs one aggregate query;
    decrypts the vault only when it changed since the cached matcher was built.
    Call it inside the team's scope (row-level security hides the vault otherwise)."""
    stamp = _vault_stamp(team_id)
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


def _vault_stamp(team_id: int) -> _Stamp:
    row = VaultEntry.objects.filter(team_id=team_id, is_secret=True).aggregate(
        entries=Count("id"), newest=Max("updated_at")
    )
    return int(row["entries"]), row["newest"]
