# Sidekick: `make run` sets up and starts the bot, `make test` sets up and runs the tests.
# Packages come from the lock files (requirements/run.lock for running, requirements/dev.lock
# for the tests and tools); `make lock` re-locks after a pyproject.toml change, `make upgrade`
# moves every package to its newest allowed version and runs the suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
LOG    := $(VENV)/install.log
# One resolution for every platform (markers kept); run.lock is cut from dev.lock's versions
# so the two always agree.
LOCK   := $(BIN)/python -m uv pip compile pyproject.toml --universal --python-version 3.11 \
          --no-header -q -c requirements/constraints.txt

# True for a Python of at least 3.11 (the one line both checks below share).
NEW_ENOUGH := -c 'import sys; sys.exit(sys.version_info < (3, 11))'
# A .venv that cannot run pip, or was made by an old or vanished Python (a failed first run,
# a copy from another machine, a tool that makes venvs without pip), is rebuilt.
VENV_BROKEN := $(shell test -e $(VENV) && { $(BIN)/python -c 'import sys, pip; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 || echo yes; })
FORCE_IF_BROKEN := $(if $(VENV_BROKEN),FORCE)
# A dependency added to pyproject.toml but not yet locked: one line naming it and the fix
# (pip check's complaints about other packages are not ours).
LOCK_CHECK = $(BIN)/python -m pip check 2>/dev/null | grep '^sidekick ' >&2 \
	&& { echo "requirements/*.lock lacks what pyproject.toml asks for: run make lock" >&2; exit 1; } || true
# pip's output goes to $(LOG); on failure its last lines are shown.
QUIET = >>$(LOG) 2>&1 || { tail -n 25 $(LOG) >&2; echo "install failed; full log: $(LOG)" >&2; exit 1; }

.PHONY: install install-dev python-check venv bwrap run setup chat doctor migrate test \
        docker-up docker-backup test-pg test-real test-docker bench bench-pg lint lock upgrade \
        clean FORCE install-opencode test-opencode test-browser

# `make install`: what running needs, nothing else.
install: python-check $(RUN_STAMP) bwrap
install-dev: python-check $(DEV_STAMP) bwrap

# One clear line instead of pip's resolver errors when python3 is too old, and one line
# naming the package when this Python cannot make a venv (Debian/Ubuntu ship venv apart).
python-check:
	@$(PYTHON) $(NEW_ENOUGH) 2>/dev/null || { \
	  echo "Sidekick needs Python 3.11 or newer; '$(PYTHON)' is $$($(PYTHON) -V 2>&1 || echo missing)." \
	       "Install one and run e.g. make PYTHON=python3.12" >&2; exit 1; }
	@test -n "$(VENV_BROKEN)" -o ! -e $(VENV) || exit 0; $(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || { \
	  echo "$(PYTHON) cannot make a virtual environment: install the venv module, e.g." \
	       "sudo apt-get install python3-venv (python3.X-venv for another version), then run make again" >&2; exit 1; }

venv: python-check
	@if [ -n "$(VENV_BROKEN)" ]; then echo "sidekick: rebuilding $(VENV) (it cannot run pip or was made by another Python)"; rm -rf $(VENV); fi
	@test -x $(BIN)/python || { echo "sidekick: creating $(VENV)"; $(PYTHON) -m venv $(VENV); }

# The lock files are installed with uv (pinned here; the same uv locks them): it installs in
# parallel from its cache, where pip spent most of `make test`'s first minute and a half.
# Compiled at install as pip does: where PYTHONDONTWRITEBYTECODE is set, nothing compiles
# later, and every process would compile aiogram, pydantic and SQLAlchemy again.
UV_VERSION := 0.13.10
UV_STAMP   := $(BIN)/.uv-$(UV_VERSION)
UV         := $(BIN)/python -m uv pip install --quiet --compile-bytecode --python $(BIN)/python
$(UV_STAMP): | venv
	@$(BIN)/python -m pip install --quiet uv==$(UV_VERSION) $(QUIET)
	@touch $@

$(RUN_STAMP): requirements/run.lock pyproject.toml $(FORCE_IF_BROKEN) | venv $(UV_STAMP)
	@echo "sidekick: installing what running needs into $(VENV) (requirements/run.lock)"
	@$(UV) -r requirements/run.lock $(QUIET)
	@$(UV) --no-deps -e . $(QUIET)
	@$(LOCK_CHECK)
	@touch $@

$(DEV_STAMP): requirements/dev.lock pyproject.toml $(FORCE_IF_BROKEN) | venv $(UV_STAMP)
	@echo "sidekick: installing the test and lint tools into $(VENV) (requirements/dev.lock)"
	@$(UV) -r requirements/dev.lock $(QUIET)
	@$(UV) --no-deps -e . $(QUIET)
	@$(LOCK_CHECK)
	@touch $@ $(RUN_STAMP)

# bubblewrap is the code tool's best sandbox. As root on Debian/Ubuntu (CI, Docker) we say
# so and install it; otherwise one line says how, and which sandbox the bot uses meanwhile.
bwrap:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "sidekick: installing bubblewrap (the code tool's sandbox) with apt-get, as root"; \
	    (apt-get update -qq && apt-get install -y -qq bubblewrap) >>$(LOG) 2>&1 \
	      || echo "could not install bubblewrap (see $(LOG)); code sandbox: $$($(BIN)/python -m tools.code.modes)"; \
	  else \
	    echo "bubblewrap missing (sudo apt-get install bubblewrap); code sandbox: $$($(BIN)/python -m tools.code.modes)"; \
	  fi; }

# A first `make run` starts from the example, readable by its owner only (it holds the token).
# On a terminal, `sidekick setup --if-needed` then asks for what the bot cannot start
# without (token, model, owner; checked as they are typed); with no terminal (CI, a
# service) nothing asks and a missing setting stops the bot with one line, as before.
.env:
	@cp .env.example .env && chmod 600 .env
	@echo "sidekick: created .env from .env.example (mode 600); it needs TELEGRAM_BOT_TOKEN, ALLOWED_USER_IDS and LLM_* (make setup asks for them)"

# Ctrl-C is how a foreground bot or chat ends: its status 130 is no error of make's.
run: install .env
	@[ ! -t 0 ] || $(BIN)/sidekick setup --if-needed
	$(BIN)/sidekick run || [ $$? -eq 130 ]

# Set up or change the token, the model, the owner and search, each checked at once.
setup: install .env
	$(BIN)/sidekick setup

chat: install .env
	$(BIN)/sidekick chat || [ $$? -eq 130 ]

# Docker with whichever Compose the host has: the v2 plugin (`docker compose`), else
# Debian's docker-compose 1.29 (docker.io ships no plugin). `docker cp` copies the backups
# out with either (1.29 has no `cp`).
COMPOSE = $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)

# Without Compose (or Docker) the line below would end in "not found": say what to install.
NO_COMPOSE = sidekick: Docker Compose is missing: install it, on Debian or Ubuntu with \
	"sudo apt-get install docker.io docker-compose", or the docker-compose-plugin package from Docker

docker-up: .env
	@$(COMPOSE) version >/dev/null 2>&1 || { echo '$(NO_COMPOSE)' >&2; exit 1; }
	$(COMPOSE) up -d

docker-backup:
	$(COMPOSE) exec sidekick sidekick backup --verify
	docker cp "$$($(COMPOSE) ps -q sidekick):/data/backups" ./backups

doctor: install .env
	$(BIN)/sidekick doctor

migrate: install .env
	$(BIN)/sidekick migrate

# The suite runs in TEST_WORKERS processes at once (pytest-xdist, --dist worksteal): a test
# spends most of its time waiting on loopback servers and child processes, so twice the cores
# (at most 8) keeps a machine busy. TEST_WORKERS=0 runs it in one process (pdb, -x).
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$((n * 2)))
PYTEST_PARALLEL = -n $(TEST_WORKERS) --dist worksteal

test: install-dev
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL)

# Re-lock after a pyproject.toml change (one command; the stamps then reinstall from it).
lock: venv $(UV_STAMP)
	$(LOCK) --extra dev -o requirements/dev.lock
	$(LOCK) -c requirements/dev.lock -o requirements/run.lock

# Every package to the newest version pyproject.toml allows, then the whole suite on it.
upgrade: venv $(UV_STAMP)
	$(LOCK) --upgrade --extra dev -o requirements/dev.lock
	$(LOCK) -c requirements/dev.lock -o requirements/run.lock
	$(MAKE) test
	@echo "sidekick: upgraded; review 'git diff requirements/' and commit it"

# Sidekick against a real llama.cpp server: scripts/real_llm.py installs llama-server and
# the models once into ~/.cache/sidekick-real (SIDEKICK_REAL_CACHE), then tests/real runs.
test-real: install-dev
	$(BIN)/python scripts/real_llm.py
	SIDEKICK_REAL=1 $(BIN)/python -m pytest -q -p no:cacheprovider tests/real

# OpenCode, the coding agent behind the code tool's `generate` (used once installed, where
# bubblewrap works): only this machine's binary and its plugin, from the npm registry
# through npm or the bun the project ships, into $(VENV)/opencode (about 240 MB).
install-opencode: install
	@$(BIN)/python scripts/install_opencode.py

# The real OpenCode binary run by the assembled app against the fake model (tests/opencode).
test-opencode: install-dev install-opencode
	SIDEKICK_OPENCODE=1 $(BIN)/python -m pytest -q -p no:cacheprovider tests/opencode

# The dashboard in a real browser: Debian's chromium, headless, driven through chromedriver
# (installed with apt-get as root on Debian/Ubuntu, like bubblewrap); each page's screenshot
# lands in build/screenshots.
test-browser: install-dev
	@command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "sidekick: installing chromium and chromium-driver (the browser tier) with apt-get, as root"; \
	    (apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium chromium-driver) >>$(LOG) 2>&1 \
	      || { echo "could not install chromium (see $(LOG))" >&2; exit 1; }; \
	  else \
	    echo "the browser tier needs chromium and its driver: sudo apt-get install chromium chromium-driver" >&2; exit 1; \
	  fi; }
	SIDEKICK_BROWSER=1 SIDEKICK_SCREENSHOTS=$(CURDIR)/build/screenshots \
	  $(BIN)/python -m pytest -q -p no:cacheprovider -rA tests/browser
	@echo "sidekick: screenshots in build/screenshots"

# Figures, not pass/fail. BENCH_ARGS=--quick trims the memory benchmark (its full run
# fills 100k memories and takes a while).
bench: install-dev
	$(BIN)/python bench/overhead.py
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/code_exec.py
	$(BIN)/python bench/memory_recall.py $(BENCH_ARGS)
	$(BIN)/python bench/tools_budget.py
	$(BIN)/python bench/tool_schemas.py
	$(BIN)/python bench/skills_catalog.py
	$(BIN)/python bench/session_split.py
	$(BIN)/python bench/media.py
	$(BIN)/python bench/reminders.py
	$(BIN)/python bench/vs_plain.py
	$(BIN)/python bench/data_growth.py
	$(BIN)/python bench/message_path.py
	$(BIN)/python bench/dashboard.py

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy bot db tools scheduler

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache

# The database tests (marker `db`: those that open the test's database or build the app,
# tests/e2e among them; tests/conftest.py picks them) on a throwaway PostgreSQL + pgvector
# (installed when root); see scripts/with-pg.sh. The rest never reach PostgreSQL.
test-pg: install-dev
	scripts/with-pg.sh $(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_PARALLEL)

# The image built and run for real against the test suite's fake Telegram and model servers;
# installs Docker from Debian when root and missing (see scripts/test-docker.sh).
test-docker: install-dev
	scripts/test-docker.sh

# Memory recall on PostgreSQL beside SQLite (same sizes, one run).
bench-pg: install-dev
	scripts/with-pg.sh $(BIN)/python bench/memory_recall.py --speed-only --backend postgres $(BENCH_ARGS)

FORCE:
