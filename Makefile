# Two commands on a fresh machine: `make run` (chat on 127.0.0.1:7860) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip

.PHONY: run test test-fast lint index bench browser-deps pg-deps clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# Stamps are keyed on pyproject.toml so a dependency change reinstalls.
$(VENV)/.run-deps: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q -e '.[dense,es,e5,topics,english]'
	touch $@

$(VENV)/.test-deps: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q -e '.[dense,es,e5,topics,english,pg,wecom,feishu,test,bench]'
	touch $@ $(VENV)/.run-deps

# make run PORT=7870 HOST=0.0.0.0: another port or address (default: ui.port and ui.host in config.yaml)
run: $(VENV)/.run-deps
	$(PY) -m bot serve $(if $(PORT),--port $(PORT)) $(if $(HOST),--host $(HOST))

index: $(VENV)/.run-deps
	$(PY) -m bot index

# Chromium, a CJK font and an emoji font for the browser tests, from Debian, when we are root (as in CI).
browser-deps:
	@if [ -x /usr/bin/chromium ] && fc-list 2>/dev/null | grep -qi 'wqy' && fc-list 2>/dev/null | grep -qi 'emoji'; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-microhei fonts-noto-color-emoji >/dev/null \
		|| echo "WARNING: could not install chromium/fonts; browser tests will be skipped"; \
	else echo "WARNING: not root and no chromium: browser tests will be skipped (apt-get install chromium fonts-wqy-microhei)"; fi

# The PostgreSQL server the log's tests start (tests/support/postgres.py runs initdb + pg_ctl as nobody): Debian's
# postgresql package; the cluster it may create is not used.
pg-deps:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null \
		|| echo "WARNING: could not install postgresql; the PostgreSQL log tests will be skipped"; \
	else echo "WARNING: not root and no initdb: the PostgreSQL log tests will be skipped (apt-get install postgresql)"; fi

lint: $(VENV)/.test-deps
	$(PY) -m ruff check
	$(PY) -m ruff format --check
	$(PY) -m mypy
	$(PY) -m bot.config.reference --check

# Two worker processes, each taking whole test files (module fixtures and servers stay in one process):
# the suite is CPU-bound, so this halves it on the 2-core CI machine. `make test WORKERS=0` runs it in one process.
WORKERS ?= 2
test: $(VENV)/.test-deps browser-deps pg-deps lint
	$(PY) -m pytest $(if $(filter-out 0,$(WORKERS)),-n $(WORKERS) --dist loadfile)

test-fast: $(VENV)/.test-deps
	$(PY) -m pytest -m "not slow and not browser"

bench: $(VENV)/.test-deps
	$(PY) -m benchmarks.run_all

clean:
	rm -rf .state test-artifacts
