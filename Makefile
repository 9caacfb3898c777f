# einmal — `make help` lists the targets.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# extra arguments for pytest, e.g. make test PYTEST_ARGS='-x -k embedded'
PYTEST_ARGS ?=
# processes make test runs the tests in (pytest-xdist); 0: all in this one, as a bare `pytest` does
PYTEST_WORKERS ?= 5
# examples per operation for make fuzz (CI runs 25)
API_FUZZ_EXAMPLES ?= 500

# $(call available,<files>,<target>): succeed if one of the files exists, else say so and fail
available = for f in $(1); do [ -e "$$f" ] && exit 0; done; echo "make $(2): not yet available"; exit 1

.PHONY: help setup run demo migrate test check docs env-docs lint fuzz chaos sequences-chaos webhooks-chaos failover retention bench clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

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

# the tests marked serial (they measure time or load) run after the others, alone on the machine: run among
# them, each would wait for every other worker's test to end, the others idle meanwhile. Either may find none
# of its kind among the tests PYTEST_ARGS chose (exit 5); it fails only when both do, or either fails.
test: $(STAMP) ## set up and run the whole test suite in PYTEST_WORKERS=5 processes, then the serial tests alone (PYTEST_ARGS='…' to pass more)
	@a=0; b=0; set -x; \
	$(BIN)/pytest -n $(PYTEST_WORKERS) -m 'not serial' $(PYTEST_ARGS) || a=$$?; \
	$(BIN)/pytest -m serial $(PYTEST_ARGS) || b=$$?; \
	set +x; if [ $$a -eq 5 ] && [ $$b -eq 5 ]; then exit 5; fi; \
	for code in $$a $$b; do [ $$code -eq 0 ] || [ $$code -eq 5 ] || exit $$code; done

docs: $(STAMP) ## build the documentation site into site/; a broken link or anchor fails it
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

env-docs: $(STAMP) ## write docs/reference/environment.md and config/einmal.env.example from Settings
	$(BIN)/python -m service.settings_doc

check: $(STAMP) ## ruff format --check, ruff check, and mypy on service/ and actors/ (config: pyproject.toml)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check $(wildcard service actors tests bench)
	$(BIN)/mypy

lint: check ## the same as make check

fuzz: $(STAMP) ## the HTTP API fuzzed from its OpenAPI document by schemathesis, API_FUZZ_EXAMPLES=500 an operation, against a node and EINMAL_DATABASE_URL: its summary (operations, test cases, failures)
	API_FUZZ_EXAMPLES=$(API_FUZZ_EXAMPLES) $(BIN)/pytest tests/web/test_api_fuzz.py -q -s

chaos: $(STAMP) ## 50,000 recipients, 3 nodes, SIGKILLs, stalls, SMTP faults, opt-outs, a PostgreSQL restart: one verdict line (CHAOS_ARGS='--help')
	$(BIN)/python -m tests.support.chaos $(CHAOS_ARGS)

sequences-chaos: $(STAMP) ## a 3-step sequence (0 s, 5 s, 10 s), 10,000 members joining in a stream, 500 leaving, 20 SIGKILLs: one verdict line (SEQUENCES_CHAOS_ARGS='--help')
	$(BIN)/python -m tests.support.sequence_chaos $(SEQUENCES_CHAOS_ARGS)

webhooks-chaos: $(STAMP) ## 10,000 recipients, 2 nodes, refusals, bounces, unsubscribes, rollbacks; a webhook receiver failing 30%, hanging, killed twice: one verdict line (WEBHOOKS_CHAOS_ARGS='--help')
	$(BIN)/python -m tests.support.webhook_chaos $(WEBHOOKS_CHAOS_ARGS)

failover: $(STAMP) ## 15,000 recipients, 2 nodes, a primary and its standby: sync, async and lagging failovers, a 60 s outage, a fixed node id; a verdict line each (FAILOVER_ARGS='--help')
	$(BIN)/python -m tests.support.failover $(FAILOVER_ARGS)

retention: $(STAMP) ## 1,000,000 send rows of the old shape migrated step by step, a prune's time at 1,000 and 100,000 rows: figures (RETENTION_ARGS='--help')
	$(BIN)/python -m tests.support.retention $(RETENTION_ARGS)

bench: ## measure throughput against the wire's limit (BENCH_ARGS='--quick', '--big', '--help')
	@$(call available,bench/__main__.py bench.py,bench)
	@$(MAKE) --no-print-directory setup
	$(BIN)/python -m bench $(BENCH_ARGS)

clean: ## remove the virtualenv and caches
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache .mypy_cache site
