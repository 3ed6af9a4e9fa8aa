# Two commands do all the set-up: `make demo` and `make test`. Nothing else by hand.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CLIENTS := tests/e2e/clients

.PHONY: demo test bench clients typecheck clean

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

# The real Claude Code and Codex CLIs, pinned in $(CLIENTS)/package.json and its lock file.
$(CLIENTS)/node_modules/.installed: $(CLIENTS)/package.json $(CLIENTS)/package-lock.json
	npm ci --prefix $(CLIENTS) --no-audit --no-fund --loglevel=error
	@touch $@

clients: $(CLIENTS)/node_modules/.installed

demo: $(VENV)/.installed
	$(PY) demo/run_demo.py

# The PostgreSQL half of tests/storage needs a server: without one its tests are skipped, except
# under CI=true, where they must run.
PG_TEST_URL := $(or $(COS_TEST_PG_URL),postgresql://postgres@127.0.0.1:5432/test)

# Byte-compile the editable sources once (a regular install ships .pyc files), so the many
# `cos` subprocesses of the suite do not recompile them when PYTHONDONTWRITEBYTECODE is set.
test: $(VENV)/.test-installed clients
	@$(PY) -c "import psycopg, sys; psycopg.connect(sys.argv[1], connect_timeout=3).close()" \
		'$(PG_TEST_URL)' 2>/dev/null || { \
		if [ "$$CI" = "true" ]; then \
			echo "make test: PostgreSQL at $(PG_TEST_URL) does not answer; start it (CI=true needs it)" >&2; \
			exit 1; \
		fi; \
		echo "make test: PostgreSQL at $(PG_TEST_URL) does not answer; its tests will be skipped" >&2; }
	$(PY) -m compileall -q src
	$(PY) -m mypy
	$(PY) -m pytest -n auto --dist worksteal -m "not alone"
	@$(PY) -m pytest -m alone || [ $$? -eq 5 ]  # 5: no test is marked alone

# The test extra brings what the benchmarks use beside the package (uv, for hook_latency.py).
bench: $(VENV)/.test-installed
	@for f in benchmarks/[!_]*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) $(CLIENTS)/node_modules
