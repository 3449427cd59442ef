"""The real settings plus tests.memoryhub.readyz_probe, an app whose one migration the
test applies and rolls back under a running server (test_readiness)."""

from memoryhub.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.memoryhub.readyz_probe"]  # noqa: F405
