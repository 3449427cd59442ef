"""Test settings: only what tests need differs from the real ones."""

from memoryhub.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING["root"]["level"] = "WARNING"  # noqa: F405

# Several test runs may share one embedded server (a helper, CI and a developer at once);
# each gets its own test database when it names one.
DATABASES["default"]["TEST"] = {"NAME": env.str("MEMORYHUB_TEST_DB_NAME", default="test_memoryhub")}  # noqa: F405
