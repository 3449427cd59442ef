"""factory_boy factories. Rows of team-scoped tables are created inside the audited
bypass scope, which is restored on exit so it never leaks into the request under test."""

from __future__ import annotations

from typing import Any

import factory

from memories.models import Memory
from memories.types import MemoryType
from teams.models import Team
from teams.scope import dangerously_bypass_team_scope


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team

    slug = factory.Sequence(lambda n: f"team-{n}")
    name = factory.LazyAttribute(lambda team: team.slug.replace("-", " ").title())


class ScopedFactory(factory.django.DjangoModelFactory):
    class Meta:
        abstract = True

    @classmethod
    def _create(cls, model_class: type, *args: Any, **kwargs: Any) -> Any:
        with dangerously_bypass_team_scope(reason="test fixture"):
            return super()._create(model_class, *args, **kwargs)


class MemoryFactory(ScopedFactory):
    class Meta:
        model = Memory

    team = factory.SubFactory(TeamFactory)
    key = factory.Sequence(lambda n: f"memory-{n}")
    content = factory.Faker("sentence")
    type = MemoryType.CONTEXT
    updated_by = "factory"
    content_hash = factory.LazyAttribute(lambda memory: Memory.hash_content(memory.content))
