# Sidekick: `make run` sets up and starts the bot, `make test` sets up and runs the tests.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install run chat doctor migrate test test-pg bench bench-pg lint clean

install: $(STAMP)

# Re-runs only when pyproject.toml changes; pip is idempotent anyway.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: install
	$(BIN)/sidekick run

chat: install
	$(BIN)/sidekick chat

doctor: install
	$(BIN)/sidekick doctor

migrate: install
	$(BIN)/sidekick migrate

test: install
	$(BIN)/python -m pytest -q

# Figures, not pass/fail. BENCH_ARGS=--quick trims the memory benchmark (its full run
# fills 100k memories and takes a while).
bench: install
	$(BIN)/python bench/overhead.py
	$(BIN)/python bench/code_exec.py
	$(BIN)/python bench/memory_recall.py $(BENCH_ARGS)
	$(BIN)/python bench/tools_budget.py
	$(BIN)/python bench/session_split.py

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy bot db tools scheduler

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache

# The whole suite on a throwaway PostgreSQL + pgvector (installed when root); see scripts/with-pg.sh.
test-pg: install
	scripts/with-pg.sh $(BIN)/python -m pytest -q -p no:cacheprovider

# Memory recall on PostgreSQL beside SQLite (same sizes, one run).
bench-pg: install
	scripts/with-pg.sh $(BIN)/python bench/memory_recall.py --speed-only --backend postgres $(BENCH_ARGS)
