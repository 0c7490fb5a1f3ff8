# Arena: `make run` sets everything up and starts the main job; `make test` runs the suite.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.installed
DEVSTAMP := $(VENV)/.installed-dev

.PHONY: run test install dev browser bench lint clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PIP) install -q -e .
	touch $@

$(DEVSTAMP): $(STAMP)
	$(PIP) install -q -e ".[dev]"
	touch $@

install: $(STAMP)

dev: $(DEVSTAMP)

## run: install, then start the service (API, web UI, scheduler, Ray workers) on embedded defaults.
run: $(STAMP)
	$(VENV)/bin/arena serve

## browser: Debian's chromium for the browser tests (never a downloaded browser build).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium not found and cannot install it: browser tests will be skipped"; fi; }

## test: install dev dependencies and run the whole suite (slow, ray, postgres included), three
## workers on two cores (the tests wait on servers and subprocesses; a third worker fills the waits).
test: $(DEVSTAMP) browser
	$(VENV)/bin/pytest -n 3 --dist loadgroup -q --durations=25

bench: $(STAMP)
	$(PY) benchmarks/engine.py
	$(PY) benchmarks/engine.py --env simple_tag-v3

## lint: ruff over every package (the rules and the 120-column limit are in pyproject.toml).
lint: $(DEVSTAMP)
	$(VENV)/bin/ruff check arena agents envs league tests benchmarks

clean:
	rm -rf $(VENV) .arena .pytest_cache
