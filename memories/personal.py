"""Personal entries: a memory whose key, or a fact whose entity, starts with
`@<username>` belongs to that team member. The database sets the row's owner from the
name and its row-level security shows the row to that person only (teams.rls,
`personal_rows`); this module is the write side's check, which refuses with a clear
answer what the database would refuse with an error (docs/tenancy.md, "Personal entries")."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection

from core.errors import DomainError
from teams.scope import EVERY_OWNER, VIEWER_SETTING
from teams.selectors import member_usernames
from teams.validators import is_key

# Django's username column: a longer owner name can be no one's, and costs no query.
MAX_USERNAME_CHARS = 150


class PersonalNameRefused(DomainError):
    code = "personal_entry"
    status = 403


def personal_owner_name(name: str) -> str | None:
    """The username a personal name belongs to, or None for a team's name."""
    if not name.startswith("@"):
        return None
    return name[1:].split(":", 1)[0]


def entry_scope(*, name: str, project: str = "") -> str:
    """`user:<username>`, `project:<name>` or `team`, as answers and pages show it."""
    owner = personal_owner_name(name)
    if owner is not None:
        return f"user:{owner}"
    return f"project:{project}" if project else "team"


class PersonalNames:
    """The check of the personal names that one write, batch or import of a team carries:
    refuse a personal name by anyone but its owner (403 `personal_entry`), and, for the
    team's own jobs and commands (viewer `*`), a name whose owner is no member of the
    team, which the database's trigger would refuse with an error.

    Only a personal name costs a query. The transaction's viewer is read once, on the
    first one, however many entries follow; on the `*` path, which names are members is
    read once for the names `expect` was given (a batch's, an import's keys) and then for
    any other name the first time it is met."""

    def __init__(self, team_id: int) -> None:
        self.team_id = team_id
        self._viewer: tuple[str, str | None] | None = None
        self._members: dict[str, bool] = {}

    def expect(self, names: Iterable[str]) -> None:
        """Read now, in at most two queries, what checking `names` one by one will need."""
        owners = _owners(names)
        if owners and self._viewer_and_username()[0] == EVERY_OWNER:
            self._read_members(owners)

    def check(self, names: Iterable[str], *, field: str) -> None:
        owners = _owners(names)
        if not owners:
            return
        viewer, username = self._viewer_and_username()
        if viewer == EVERY_OWNER:
            self._check_members(owners, field=field)
            return
        if username is None:
            raise PersonalNameRefused(
                "names starting with @ are personal; a team's token cannot write them "
                "(use a token issued to a person)",
                field=field,
            )
        if owners != {username}:
            raise PersonalNameRefused(
                f"names starting with @ are personal: yours start with @{username}", field=field
            )

    def _check_members(self, owners: set[str], *, field: str) -> None:
        self._read_members(owners)
        strangers = sorted(owner for owner in owners if not self._members[owner])
        if strangers:
            # Named only when it could be a username: the name is the caller's own input.
            shown = strangers[0] if _plausible_username(strangers[0]) else "that name"
            raise PersonalNameRefused(
                f"names starting with @ are personal: no member of the team is named {shown}",
                field=field,
            )

    def _read_members(self, owners: set[str]) -> None:
        unknown = {owner for owner in owners if owner not in self._members}
        if not unknown:
            return
        # A name no key could carry (too long, NUL, other characters) is no one's: the
        # query never sees it.
        plausible = {owner for owner in unknown if _plausible_username(owner)}
        members = member_usernames(team_id=self.team_id, usernames=plausible) if plausible else set()
        self._members.update((owner, owner in members) for owner in unknown)

    def _viewer_and_username(self) -> tuple[str, str | None]:
        if self._viewer is None:
            self._viewer = _viewer()
        return self._viewer


def _plausible_username(owner: str) -> bool:
    return len(owner) <= MAX_USERNAME_CHARS and is_key(owner)


def _owners(names: Iterable[str]) -> set[str]:
    return {owner for name in names if (owner := personal_owner_name(name)) is not None}


def _viewer() -> tuple[str, str | None]:
    """The transaction's viewer setting and, for a person, their username."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT v.viewer, u.username FROM (SELECT current_setting(%s, true) AS viewer) v"
            " LEFT JOIN auth_user u ON u.id = CASE WHEN v.viewer ~ '^[0-9]+$' THEN v.viewer::bigint END",
            [VIEWER_SETTING],
        )
        viewer, username = cursor.fetchone()
    return viewer or "", username
