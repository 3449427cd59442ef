"""Test settings: only what tests need differs from the real ones."""

from memoryhub.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING["root"]["level"] = "WARNING"  # noqa: F405

# Several test runs may share one embedded server (a helper, CI and a developer at once);
# each gets its own test database when it names one.
DATABASES["default"]["TEST"] = {"NAME": env.str("MEMORYHUB_TEST_DB_NAME", default="test_memoryhub")}  # noqa: F405
# No connection pool in the test process (the servers and workers a test starts have it):
# a pool is made once per alias with the settings of its first connection, and Django's
# test database setup renames the database without closing it, so a pool opened before
# would go on lending connections to the service's database. The test client hands no
# connection back between requests anyway. tests/memoryhub/test_database_pool.py turns
# it on for its own tests.
DATABASES["default"]["OPTIONS"].pop("pool", None)  # noqa: F405
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)  # noqa: F405
for _replica in DATABASE_REPLICAS:  # noqa: F405
    DATABASES[_replica]["OPTIONS"].pop("pool", None)  # noqa: F405 (its own dict, not the primary's)
    DATABASES[_replica]["CONN_MAX_AGE"] = DATABASES["default"]["CONN_MAX_AGE"]  # noqa: F405

# Tasks run in-process unless a test routes them to the Redis and the worker the suite
# starts itself (tests/worker.py): a REDIS_URL in the developer's shell is never used.
REDIS_URL = ""
CELERY_BROKER_URL = "memory://"
CELERY_TASK_ALWAYS_EAGER = True

# The API throttles count in this process, never in a Redis of the developer's; the rates
# are high enough that no other test meets them (tests/api/test_throttling.py lowers them).
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
MEMORYHUB_THROTTLE_READ = MEMORYHUB_THROTTLE_WRITE = MEMORYHUB_THROTTLE_ANONYMOUS = "100000/min"

# The test client and the live server speak plain HTTP, as `make run` does with
# MEMORYHUB_PLAIN_HTTP (tests/memoryhub/test_deploy_check.py checks the HTTPS settings).
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE_SSL_REDIRECT = False
SECURE_HSTS_SECONDS = 0
