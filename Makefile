# Grandbo developer commands. `make run` and `make test` work on a fresh machine:
# both create .venv and install what they need from PyPI first (`make run` only what
# serving locally needs; `make test` adds the CDK, the linters, the test tools and MkDocs).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# the local runner's ports: make run PORT=9300 CONSOLE_PORT=9310 (every command that talks
# to the runner finds them in its data directory: .grandbo/serving.json)
PORT ?= 8787
CONSOLE_PORT ?= 8790
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed
EVAL_DATA ?= ../shared/eval/cloud_postmortems
SRC := shared tests app.py docs/reference tools $(wildcard functions infra bench)

.PHONY: vendor-css install run test pgbouncer chromium unit integration lint lint-infra format eval bench bench-scale bench-experiments bench-load layer layer-lock openapi synth docs clean

# what serving locally needs: the embedded store, the local model, the handlers, MCP, console
$(RUN_STAMP): pyproject.toml
	@if [ -f $(STAMP) ] && [ $(STAMP) -nt pyproject.toml ]; then touch $(RUN_STAMP); else \
	  $(PYTHON) -m venv $(VENV) && $(BIN)/pip install --quiet --upgrade pip && \
	  echo "installing what serving locally needs (about a minute on a fresh machine)..." && \
	  $(BIN)/pip install --progress-bar on -e ".[local,aws,mcp,console]" && \
	  touch $(RUN_STAMP); fi

# everything: the above, the CDK, the linters, the test tools and the docs site's builder
$(STAMP): $(RUN_STAMP) pyproject.toml
	@echo "installing the tests' tools, the CDK and MkDocs..."
	$(BIN)/pip install --progress-bar on -e ".[local,aws,infra,dev,mcp,console,docs]"
	touch $(STAMP)

install: $(STAMP)

## Run Grandbo locally: embedded PostgreSQL + pgvector, local MiniLM model, demo organization,
## every Lambda behind a local HTTP gateway on 127.0.0.1:8787.
run: $(RUN_STAMP)
	$(BIN)/grandbo serve --port $(PORT) --console-port $(CONSOLE_PORT)

## The whole suite (lint, types, unit, integration on a real embedded PostgreSQL, the
## store also through PgBouncer in transaction mode, as RDS Proxy multiplexes it, and the
## console in Debian's headless Chromium).
test: lint $(STAMP) pgbouncer chromium
	$(BIN)/pytest -q

## Debian's PgBouncer, for the transaction-pooler tests (tests/integration/transaction_pooler.py)
pgbouncer:
	@command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && \
	    apt-get install -y -q --no-install-recommends pgbouncer; \
	  else echo "the tests need PgBouncer: sudo apt-get install pgbouncer" >&2; exit 1; fi; }

## Debian's Chromium, for the console's browser tests (tests/browser; nothing downloads one)
chromium:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && \
	    apt-get install -y -q --no-install-recommends chromium; \
	  else echo "the browser tests need Chromium: sudo apt-get install chromium" >&2; exit 1; fi; }

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

integration: $(STAMP) pgbouncer
	$(BIN)/pytest -q tests/integration

lint: $(STAMP)
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)
	$(BIN)/mypy
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff format $(SRC)
	$(BIN)/ruff check --fix $(SRC)

eval: $(STAMP)
	$(BIN)/grandbo eval $(EVAL_DATA) --task symptom
	$(BIN)/grandbo eval $(EVAL_DATA) --task mechanism

## Benchmarks (not tests): handler imports, topology, query/write/embed at scale (~25 min).
bench: $(STAMP)
	$(BIN)/pip install --quiet -e ".[bench]"
	$(BIN)/python -m bench.handler_imports
	$(BIN)/python -m bench.topology
	$(BIN)/python -m bench.query_scale
	$(BIN)/python -m bench.local_load

## The figures at scale (docs/BENCHMARKS.md): local throughput, a thousand organizations, the
## search in one call, the query handler's overhead, what a query and a write cost in AWS.
bench-scale: $(STAMP)
	$(BIN)/pip install --quiet -e ".[bench]"
	$(BIN)/python -m bench.throughput --entries 2000 --seconds 8
	$(BIN)/python -m bench.thousand_orgs --runs 200
	$(BIN)/python -m bench.search_round_trip --runs 200
	$(BIN)/python -m bench.handler_overhead --runs 300
	$(BIN)/python -m bench.lambda_cost --runs 200

## The experiments behind issue 16's and 28's decisions, rerun (docs/BENCHMARKS.md,
## "Experiments"): vector layout, half precision, the lexical leg's approximations and early stops.
bench-experiments: $(STAMP)
	$(BIN)/pip install --quiet -e ".[bench]"
	$(BIN)/python -m bench.experiments.layout_planning
	$(BIN)/python -m bench.experiments.halfvec --runs 100
	$(BIN)/python -m bench.experiments.lexical_scale --runs 100
	$(BIN)/python -m bench.experiments.lexical_pruning
	$(BIN)/python -m bench.experiments.lexical_threshold
	$(BIN)/python -m bench.experiments.lexical_maxscore

## The local runner under 1, 8 and 32 clients, then with its PostgreSQL killed (~3 min).
bench-load: $(STAMP)
	$(BIN)/python -m bench.local_load

## The documentation site, offline, into site/ (strict: a broken link fails it). Installs only
## what the site needs (MkDocs and grandbo's own parser for the CLI reference), not the tests' tools.
DOCS_STAMP := $(VENV)/.installed-docs
$(DOCS_STAMP): pyproject.toml
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -e ".[docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	DISABLE_MKDOCS_2_WARNING=true NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict
	@echo "open site/index.html"

openapi: $(STAMP)
	$(BIN)/grandbo openapi > docs/openapi.json

## The Lambda layer from infra/layer.lock, built without Docker: prints its size and versions.
layer: $(STAMP)
	$(BIN)/python -m infra.layer

## Re-resolve infra/layer.in for the layer's platform, with hashes (then align pyproject's pins);
## the Python 3.13 lock (`-c python=3.13`) takes the same versions, for its own wheels.
layer-lock: $(STAMP)
	$(BIN)/pip install --quiet uv
	$(BIN)/uv pip compile infra/layer.in --python-platform aarch64-manylinux2014 \
	  --python-version 3.11 --generate-hashes --only-binary :all: --quiet \
	  --custom-compile-command "make layer-lock" -o infra/layer.lock
	$(BIN)/uv pip compile infra/layer.in --constraint infra/layer.lock \
	  --python-platform aarch64-manylinux_2_28 --python-version 3.13 --generate-hashes \
	  --only-binary :all: --quiet --custom-compile-command "make layer-lock" \
	  -o infra/layer-py313.lock

## Synthesize the CDK app offline into cdk.out/ (asset bundling skipped; `cdk deploy` bundles).
# jsii (the CDK's runtime) supports Node 22 and 24; on another release it prints a framed
# banner that Python relays as byte strings: one line of ours says it instead
JSII_QUIET := JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1 \
  JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=18,20 JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION=1
NODE_NOTE = @node -e 'const m = +process.versions.node.split(".")[0]; \
  if (![22, 24].includes(m)) console.error("note: Node " + process.version + " runs the synth; the CDK supports Node 22 or 24: use one of them to deploy")' 2>&1 || true

synth: $(STAMP)
	$(NODE_NOTE)
	$(JSII_QUIET) CDK_OUTDIR=cdk.out \
	CDK_CONTEXT_JSON='{"aws:cdk:bundling-stacks": [], "stage": "$(or $(STAGE),dev)", "alarm_email": "$(or $(ALARM_EMAIL),oncall@example.com)"}' \
	$(BIN)/python app.py
	@ls cdk.out/*.template.json

## cfn-lint and checkov on both stages' synthesized templates (their own venv: .venv-lint).
## Every checkov finding is fixed or skipped on its resource with a reason (infra/checkov.py).
LINT_VENV := .venv-lint
$(LINT_VENV)/.installed: infra/lint.txt
	$(PYTHON) -m venv $(LINT_VENV)
	$(LINT_VENV)/bin/pip install --quiet -r infra/lint.txt
	touch $@

lint-infra: $(STAMP) $(LINT_VENV)/.installed
	rm -rf cdk.out/lint && for stage in dev prod; do \
	  $(JSII_QUIET) CDK_OUTDIR=cdk.out/lint/$$stage \
	  CDK_CONTEXT_JSON="{\"aws:cdk:bundling-stacks\": [], \"stage\": \"$$stage\", \"alarm_email\": \"oncall@example.com\"}" \
	  $(BIN)/python app.py || exit 1; done
	$(LINT_VENV)/bin/cfn-lint cdk.out/lint/*/*.template.json
	$(LINT_VENV)/bin/checkov --framework cloudformation --quiet --compact --skip-download \
	  -f cdk.out/lint/dev/Grandbo-dev.template.json -f cdk.out/lint/prod/Grandbo-prod.template.json

clean:
	rm -rf $(VENV) $(LINT_VENV) .grandbo site

# Pico CSS for the console, from the npm registry (tools/vendor_pico.py; the files are
# committed: nothing is fetched when the console runs or its tests do)
vendor-css: $(STAMP)
	$(BIN)/python tools/vendor_pico.py $(or $(PICO_VERSION),2.1.1)
