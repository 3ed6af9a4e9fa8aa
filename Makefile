# Two commands do all the set-up: `make demo` and `make test`. Nothing else by hand.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CLIENTS := tests/e2e/clients

.PHONY: demo test test-fast bench clients chromium typecheck clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Installed (non-editable build of the package would go stale while editing; hatchling's
# editable mode is a plain path entry, which keeps the hook's start-up cost down).
$(VENV)/.installed: $(PY) pyproject.toml
	$(PY) -m pip install --quiet -e .
	@touch $@

$(VENV)/.test-installed: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $@

# The real agent CLIs and ACP clients, pinned in $(CLIENTS)/package.json and its lock file.
# `npm install --no-save` installs what the lock file says and changes nothing; `npm ci` would
# refuse it, because a dependency of acpx lists optional packages for other platforms that the
# registry does not serve, so the lock file cannot name them.
$(CLIENTS)/node_modules/.installed: $(CLIENTS)/package.json $(CLIENTS)/package-lock.json
	npm install --prefix $(CLIENTS) --no-save --no-audit --no-fund --loglevel=error
	@touch $@

clients: $(CLIENTS)/node_modules/.installed

# The browser tests (tests/e2e/test_web_browser.py) drive Debian's chromium through Playwright;
# no browser is downloaded. Run as root, this installs it with apt-get when /usr/bin/chromium is
# missing; otherwise those tests are skipped, except under CI=true, where a missing chromium fails.
CHROMIUM := /usr/bin/chromium

chromium:
	@if [ -x $(CHROMIUM) ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then \
		echo "make test: $(CHROMIUM) is missing; installing Debian's chromium (apt-get install -y chromium)"; \
		apt-get install -y -qq chromium >/dev/null 2>&1 || { \
			apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } \
			|| { echo "make test: apt-get install chromium failed" >&2; \
			     [ "$$CI" != "true" ] || exit 1; }; \
		if [ -x $(CHROMIUM) ]; then echo "make test: installed $$($(CHROMIUM) --version 2>/dev/null)"; fi; \
	elif [ "$$CI" = "true" ]; then \
		echo "make test: $(CHROMIUM) is missing; install it (apt-get install chromium): CI=true needs it" >&2; \
		exit 1; \
	else \
		echo "make test: $(CHROMIUM) is missing and this is not root; the browser tests will be skipped (apt-get install chromium)" >&2; \
	fi

demo: $(VENV)/.installed
	$(PY) demo/run_demo.py

# The PostgreSQL half of tests/storage needs a server: without one its tests are skipped, except
# under CI=true, where they must run.
PG_TEST_URL := $(or $(COS_TEST_PG_URL),postgresql://postgres@127.0.0.1:5432/test)

# The suite's temporary files (pytest's tmp_path, and TMPDIR for what the tests and cos make
# with tempfile) go to a RAM-backed folder of this checkout under /dev/shm when there is one:
# cos fsyncs what it stores, and on a shared disk those waits made the suite's time swing by
# half. The files, renames, locks and fsync calls are the same; a test that needs another
# filesystem than its tmp dir takes the disk (tests/checkpoints/test_restore.py). The folder is
# emptied at the start of each run and removed after a run that passed. Its name is short:
# a socket's path (the daemon's, a runner's) must stay under 108 bytes.
TEST_TMP := $(if $(wildcard /dev/shm),/dev/shm/cos-$(shell printf %s '$(CURDIR)' | cksum | cut -d' ' -f1))
PYTEST := $(if $(TEST_TMP),mkdir -p $(TEST_TMP)/t && TMPDIR=$(TEST_TMP)/t $(PY) -m pytest --basetemp=$(TEST_TMP)/b,$(PY) -m pytest)
CLEAN_TEST_TMP := $(if $(TEST_TMP),rm -rf $(TEST_TMP),true)

# Byte-compile the editable sources once (a regular install ships .pyc files), so the many
# `cos` subprocesses of the suite do not recompile them when PYTHONDONTWRITEBYTECODE is set.
test: $(VENV)/.test-installed clients chromium
	@$(PY) -c "import psycopg, sys; psycopg.connect(sys.argv[1], connect_timeout=3).close()" \
		'$(PG_TEST_URL)' 2>/dev/null || { \
		if [ "$$CI" = "true" ]; then \
			echo "make test: PostgreSQL at $(PG_TEST_URL) does not answer; start it (CI=true needs it)" >&2; \
			exit 1; \
		fi; \
		echo "make test: PostgreSQL at $(PG_TEST_URL) does not answer; its tests will be skipped" >&2; }
	$(PY) -m compileall -q src
	$(PY) -m mypy
	$(PYTEST) -n auto --dist worksteal
	@$(CLEAN_TEST_TMP)

# The loop while working: every test but those marked slow (crash loops, large trees, two-host
# runs, long scenarios) and those driving the real clients (e2e), so neither the clients, nor
# Chromium, nor PostgreSQL are needed (its tests are skipped without it); no mypy.
test-fast: $(VENV)/.test-installed
	$(PY) -m compileall -q src
	$(PYTEST) -n auto --dist worksteal -m "not slow and not e2e"
	@$(CLEAN_TEST_TMP)

# The test extra brings what the benchmarks use beside the package (uv, for hook_latency.py).
# Every benchmark runs and prints its figures, whatever the ones before it found; at the end the
# target fails if any figure is off its target (a RESULT line marked OVER, MISS or UNDER) or any
# benchmark crashed, listing each.
BENCHMARKS ?= $(sort $(wildcard benchmarks/[!_]*.py))

bench: $(VENV)/.test-installed
	@runs=$$(mktemp -d); trap 'rm -rf "$$runs"' EXIT; : > "$$runs/off"; : > "$$runs/crashed"; \
	for f in $(BENCHMARKS); do \
		echo "== $$f"; \
		{ $(PY) $$f; echo $$? > "$$runs/code"; } 2>&1 | tee "$$runs/out"; \
		code=$$(cat "$$runs/code"); \
		[ "$$code" = 0 ] || echo "$$f crashed (exit $$code)" >> "$$runs/crashed"; \
		grep -E '^RESULT .*[ :](OVER|MISS|UNDER)( |$$)' "$$runs/out" >> "$$runs/off"; \
	done; \
	echo "== make bench: $(words $(BENCHMARKS)) benchmarks"; \
	if [ -s "$$runs/off" ] || [ -s "$$runs/crashed" ]; then \
		[ ! -s "$$runs/off" ] || { echo "off target:"; cat "$$runs/off"; }; \
		cat "$$runs/crashed"; \
		exit 1; \
	fi; \
	echo "every figure is on its target"

clean:
	rm -rf $(VENV) $(CLIENTS)/node_modules
