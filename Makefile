# Two entry points for a newcomer: `make demo` and `make test`. Both build .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: demo test bench lab clean postgres postgres-stop

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Re-install only when the project's dependency list changes.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/cyber-agent demo

NBVAL := --nbval-lax --nbval-current-env --nbval-cell-timeout=120 $(if $(wildcard notebooks/sanitize.cfg),--nbval-sanitize-with notebooks/sanitize.cfg,)

test: $(STAMP)
	$(BIN)/ruff check cyber_agent tests bench notebooks
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest -q tests
	$(if $(wildcard notebooks/*.ipynb),$(BIN)/python -m pytest -q $(NBVAL) notebooks,)

bench: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	$(BIN)/python bench/run_all.py

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks

# A local PostgreSQL 15 (Debian's postgresql-15) in .pg/, socket only; prints the store URL to export.
postgres: $(STAMP)
	$(BIN)/python tests/pg_server.py start .pg

postgres-stop:
	$(BIN)/python tests/pg_server.py stop .pg

clean:
	rm -rf $(VENV) .trace
