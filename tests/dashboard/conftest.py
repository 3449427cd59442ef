"""The dashboard's cast: people of team alpha with every role, and bob of team bravo.

alpha (the `team` fixture): olivia (owner), adam (admin), mia (member), vera (viewer).
bravo (the `other_team` fixture): bob (owner), with a memory, a vault secret, a token
and an agent session of its own, so outsider tests have something to find.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import AbstractUser
from django.test import Client

from agents.sessions import boot_session
from memories import writes
from memories.models import Memory
from teams import services as team_services
from teams.models import AgentToken, Membership, Team
from teams.scope import team_scope

PASSWORD = "correct horse battery staple"


def join(team: Team, user: AbstractUser, role: str) -> Membership:
    with team_scope(team.id):
        return Membership.objects.create(team=team, user=user, role=role)


def save(
    team: Team, key: str, content: str, *, by: str = "agent", reason: str | None = None, **extra: Any
) -> Memory:
    with team_scope(team.id):
        return writes.save_memory(
            team=team, key=key, content=content, updated_by=by, supersede_reason=reason, **extra
        ).memory


def client_for(user: AbstractUser) -> Client:
    client = Client()
    client.force_login(user)
    return client


@dataclass
class Cast:
    owner: AbstractUser
    admin: AbstractUser
    member: AbstractUser
    viewer: AbstractUser
    outsider: AbstractUser

    def client(self, role: str) -> Client:
        return client_for(getattr(self, role))


@pytest.fixture
def cast(team: Team, other_team: Team, django_user_model: Any) -> Cast:
    def user(name: str) -> AbstractUser:
        return django_user_model.objects.create_user(name, f"{name}@example.com", PASSWORD)

    people = Cast(
        owner=user("olivia"),
        admin=user("adam"),
        member=user("mia"),
        viewer=user("vera"),
        outsider=user("bob"),
    )
    join(team, people.owner, Membership.Role.OWNER)
    join(team, people.admin, Membership.Role.ADMIN)
    join(team, people.member, Membership.Role.MEMBER)
    join(team, people.viewer, Membership.Role.VIEWER)
    join(other_team, people.outsider, Membership.Role.OWNER)
    return people


@dataclass
class BravoData:
    """What team bravo holds: every string here must stay out of alpha's pages."""

    memory_key: str
    memory_content: str
    vault_key: str
    secret: str
    token: AgentToken
    membership_id: int
    session_task: str


@pytest.fixture
def bravo(other_team: Team, cast: Cast) -> BravoData:
    save(other_team, "bravo-launch-plan", "Bravo launches the zeppelin on Tuesday.", by="bravo-bot")
    save(
        other_team,
        "bravo-launch-plan",
        "Bravo launches the zeppelin on Wednesday.",
        by="bravo-bot",
        reason="weather moved the launch",
    )
    with team_scope(other_team.id):
        team_services.set_vault_entry(
            team=other_team,
            key="bravo-db-password",
            value="zeppelin-s3cret-42",
            is_secret=True,
            actor="bob",
        )
        membership_id = Membership.objects.get(team=other_team, user=cast.outsider).pk
    token = team_services.create_token(
        team=other_team, name="bravo-deployer", scopes=["read"], actor="test"
    ).token
    with team_scope(other_team.id):
        boot_session(team=other_team, token=token, agent="bravo-agent", current_task="inflating the zeppelin")
    return BravoData(
        memory_key="bravo-launch-plan",
        memory_content="Bravo launches the zeppelin",
        vault_key="bravo-db-password",
        secret="zeppelin-s3cret-42",
        token=token,
        membership_id=membership_id,
        session_task="inflating the zeppelin",
    )
