# einmal — `make help` lists the targets.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: help setup run demo migrate test lint chaos bench clean

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,fast]'
	touch $(STAMP)

setup: $(STAMP) ## create .venv and install einmal there (.venv/bin/einmal)

run: demo ## set up and run the main job: the end-to-end demo

demo: $(STAMP) ## embedded PostgreSQL + capture SMTP + sample campaign, end to end
	$(BIN)/einmal demo

migrate: $(STAMP) ## apply migrations to the configured (or embedded) database
	$(BIN)/einmal migrate

test: $(STAMP) ## set up and run the whole test suite
	$(BIN)/pytest

lint: $(STAMP) ## ruff
	$(BIN)/ruff check service actors tests bench

clean: ## remove the virtualenv and caches
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache
