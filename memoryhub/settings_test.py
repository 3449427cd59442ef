"""Test settings: only what tests need differs from the real ones."""

from memoryhub.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING["root"]["level"] = "WARNING"  # noqa: F405

# Several test runs may share one embedded server (a helper, CI and a developer at once);
# each gets its own test database when it names one.
DATABASES["default"]["TEST"] = {"NAME": env.str("MEMORYHUB_TEST_DB_NAME", default="test_memoryhub")}  # noqa: F405

# Tasks run in-process unless a test routes them to the Redis and the worker the suite
# starts itself (tests/worker.py): a REDIS_URL in the developer's shell is never used.
REDIS_URL = ""
CELERY_BROKER_URL = "memory://"
CELERY_TASK_ALWAYS_EAGER = True
