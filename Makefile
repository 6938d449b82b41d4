# Berth: run, test, lint and benchmark. See README.md.

CARGO ?= cargo

.PHONY: run test lint bench soak sim build image deps fmt

## Start Redis (when none answers), the four services and a demo fleet; Ctrl-C stops them.
run:
	bash scripts/run.sh

## Every test: unit, property and integration tests against real redis-server processes (single and cluster).
test: deps
	$(CARGO) test --workspace --all-targets --locked
	$(CARGO) test --workspace --doc --locked

## fmt, clippy with warnings as errors, buf lint of the contracts, and the Kubernetes overlays rendered and
## validated offline against a current release's schemas.
lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	npx --no-install buf lint
	bash scripts/lint-deploy.sh

## The load tests with short defaults; figures in load-tests/reports/latest.json. BERTH_BENCH_* variables choose
## the scenario and its size (load-tests/README.md); servers are 20,000 unless BERTH_BENCH_SERVERS says otherwise.
BERTH_BENCH_SERVERS ?= 20000
bench: deps
	$(CARGO) build --workspace --release --locked --bins && $(CARGO) run --release --locked -p berth-load-tests -- --servers $(BERTH_BENCH_SERVERS)

## The soak with chaos: every service twice over a persistent Redis, mixed traffic, replicas killed and Redis
## restarted and paused, then the invariants checked. BERTH_BENCH_MINUTES long (2 unless it says otherwise).
BERTH_BENCH_MINUTES ?= 2
soak: deps
	$(CARGO) build --workspace --release --locked --bins && $(CARGO) run --release --locked -p berth-load-tests -- --scenario soak --minutes $(BERTH_BENCH_MINUTES) --servers 2000 --concurrency 8

## The policy simulator: a day of demand replayed against each scaling policy; a table, and a chart in
## load-tests/reports/sim.png. BERTH_SIM_* variables change the day (`berth-sim --help`).
sim: deps
	$(CARGO) run --release --locked -p berth-sim

build:
	$(CARGO) build --workspace --release --locked --bins

## The container image berth:local, from this machine's release build (no registry needed; deploy/README.md).
image: build
	bash scripts/image.sh

fmt:
	$(CARGO) fmt --all

## What the targets need on a fresh machine: redis-server, and buf from npm.
deps:
	bash scripts/deps.sh
