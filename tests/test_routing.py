"""Every API viewset goes through TeamScopedViewSet, and none can step around it."""

from __future__ import annotations

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from teams.viewsets import TeamScopedViewSet


def all_patterns(patterns: list, prefix: str = "") -> list[tuple[str, object]]:  # type: ignore[type-arg]
    found = []
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            found += all_patterns(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            found.append((prefix + str(pattern.pattern), pattern.callback))
    return found


def test_every_api_v1_viewset_inherits_the_team_scoped_base() -> None:
    api_views = [
        (route, cb) for route, cb in all_patterns(get_resolver().url_patterns) if route.startswith("api/v1/")
    ]

    assert api_views
    for route, callback in api_views:
        view_class = getattr(callback, "cls", None)
        assert view_class is not None and issubclass(view_class, TeamScopedViewSet), route


@pytest.mark.parametrize("method", ["get_queryset", "get_object", "dispatch", "initial"])
def test_subclasses_may_not_override_the_scoping_hooks(method: str) -> None:
    with pytest.raises(TypeError, match=method):
        type("Sneaky", (TeamScopedViewSet,), {method: lambda self: None})
