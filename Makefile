# Two commands on a fresh machine: `make run` (chat on 127.0.0.1:7860) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip

.PHONY: run test test-fast lint index bench browser-deps clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# Stamps are keyed on pyproject.toml so a dependency change reinstalls.
$(VENV)/.run-deps: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q -e '.[dense,es,e5]'
	touch $@

$(VENV)/.test-deps: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q -e '.[dense,es,e5,wecom,test,bench]'
	touch $@ $(VENV)/.run-deps

# make run PORT=7870 HOST=0.0.0.0: another port or address (default: ui.port and ui.host in config.yaml)
run: $(VENV)/.run-deps
	$(PY) app.py $(if $(PORT),--port $(PORT)) $(if $(HOST),--host $(HOST))

index: $(VENV)/.run-deps
	$(PY) -m bot index

# Chromium, a CJK font and an emoji font for the browser tests, from Debian, when we are root (as in CI).
browser-deps:
	@if [ -x /usr/bin/chromium ] && fc-list 2>/dev/null | grep -qi 'wqy' && fc-list 2>/dev/null | grep -qi 'emoji'; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-microhei fonts-noto-color-emoji >/dev/null \
		|| echo "WARNING: could not install chromium/fonts; browser tests will be skipped"; \
	else echo "WARNING: not root and no chromium: browser tests will be skipped (apt-get install chromium fonts-wqy-microhei)"; fi

lint: $(VENV)/.test-deps
	$(PY) -m ruff check
	$(PY) -m ruff format --check
	$(PY) -m mypy

test: $(VENV)/.test-deps browser-deps lint
	$(PY) -m pytest

test-fast: $(VENV)/.test-deps
	$(PY) -m pytest -m "not slow and not browser"

bench: $(VENV)/.test-deps
	$(PY) -m benchmarks.run_all

clean:
	rm -rf .state test-artifacts
