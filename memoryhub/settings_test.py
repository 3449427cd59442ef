"""Test settings: only what tests need differs from the real ones."""

from memoryhub.settings import *  # noqa: F403
from memoryhub.settings import OPERATOR_DATABASE as SERVICE_OPERATOR_DATABASE

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING["root"]["level"] = "WARNING"  # noqa: F405

# One connection plays both logins in the test process. The service's two connections
# (the application's, and the operator's that dangerously_bypass_team_scope switches to)
# cannot share a transaction, and every test runs in one that is rolled back. So the test
# process logs in as the operator and takes the application role for its session
# (tests/db_roles.py), and the bypass only changes the role back for its block. The
# servers, workers and commands that tests start get both logins, as the service does
# (SERVICE_LOGINS); tests/teams/test_operator_login.py runs the operator paths there.
SERVICE_LOGINS = {
    alias: {"USER": DATABASES[alias]["USER"], "PASSWORD": DATABASES[alias]["PASSWORD"]}  # noqa: F405
    for alias in ("default", SERVICE_OPERATOR_DATABASE)
}
DATABASES["default"].update(SERVICE_LOGINS[SERVICE_OPERATOR_DATABASE])  # noqa: F405
del DATABASES[SERVICE_OPERATOR_DATABASE]  # noqa: F405
OPERATOR_DATABASE = "default"

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

# The test client loads the middleware for every client it makes; WhiteNoise's scan of the
# apps' static files runs once per process instead (tests/static_files.py).
MIDDLEWARE = [
    "tests.static_files.WhiteNoiseScannedOnce"
    if name == "whitenoise.middleware.WhiteNoiseMiddleware"
    else name
    for name in MIDDLEWARE  # noqa: F405
]

# Tasks run in-process unless a test routes them to the Redis and the worker the suite
# starts itself (tests/worker.py): a REDIS_URL in the developer's shell is never used.
REDIS_URL = ""
CELERY_BROKER_URL = IN_PROCESS_BROKER_URL  # noqa: F405
CELERY_TASK_ALWAYS_EAGER = True

# The API throttles count in this process, never in a Redis of the developer's; the rates
# are high enough that no other test meets them (tests/api/test_throttling.py lowers them).
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
MEMORYHUB_THROTTLE_READ = MEMORYHUB_THROTTLE_WRITE = MEMORYHUB_THROTTLE_ANONYMOUS = "100000/min"

# The test client and the live server speak plain HTTP, as `make run` does with
# MEMORYHUB_PLAIN_HTTP (tests/memoryhub/test_deploy_check.py checks the HTTPS settings).
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE_SSL_REDIRECT = False
SECURE_HSTS_SECONDS = 0
