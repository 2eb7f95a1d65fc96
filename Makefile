# netcoll: the front door. `make help` lists the targets; README.md explains them.
#
# Conventions follow p4lang/tutorials' utils/Makefile: programs compile into build/, P4Runtime
# request logs go to logs/, results to results/, and every variable below can be overridden on
# the command line (make run TOPO=df:2,4,2).

SHELL := /bin/bash
.DEFAULT_GOAL := help

SYSTEM_PYTHON ?= /usr/bin/python3
VENV ?= .venv
PY := $(VENV)/bin/python
BUILD_DIR ?= build
LOG_DIR ?= logs
RESULTS_DIR ?= results
P4C ?= p4c-bm2-ss
P4TEST ?= p4test
P4_DEFINES ?=
TOPO ?= df:2,2,1
RUN_ARGS ?=
LAUNCH_ARGS ?= --collective bcast --algorithms innet,binomial --sizes 1,16384
PYTEST_ARGS ?=
BENCH_ARGS ?=
RELIABILITY_ARGS ?=
REPRODUCE_ARGS ?=
SIM_TOPO ?= df:2,4,2
SIM_ARGS ?=
TNA_INCLUDE_DIR ?=
TNA_P4C ?=
TNA_PROGRAM ?= p4src/tna/netcoll.p4
TNA_ARGS ?=
export NETCOLL_STATE_DIR ?= /tmp/netcoll-state
# The simple_switch_grpc to run (a path, or a name on PATH): e.g. a BMv2 built for timing
BMV2 ?=
ifneq ($(BMV2),)
export NETCOLL_BMV2 := $(BMV2)
endif
export VENV SYSTEM_PYTHON TNA_INCLUDE_DIR

P4_COMMON := $(wildcard p4src/common/*.p4)
V1_PROGRAMS := $(notdir $(basename $(wildcard p4src/v1model/netcoll*.p4)))
V1_JSON := $(patsubst %,$(BUILD_DIR)/%.json,$(V1_PROGRAMS))
HAVE_P4C := $(shell command -v $(P4C) >/dev/null 2>&1 && echo yes)
PYTEST := $(PY) -m pytest
# pytest exits 5 when it collects nothing (a tier filtered away): not a failure.
define run_pytest
	$(PYTEST) $(1) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests for this tier"; rc=0; fi; exit $$rc
endef

.PHONY: help deps doctor build build-tna run smoke launch test test-e2e test-e2e-subset test-reliability \
        reliability bench reproduce calibrate simulate lint \
        format stop clean need-venv need-bmv2 need-p4c

help:
	@echo "netcoll: in-network collectives on P4 switches (see README.md)"
	@echo
	@echo "  make deps         install system packages, p4c/BMv2 where p4lang packages them, the venv"
	@echo "  make doctor       check every tool the project needs, with versions"
	@echo "  make build        compile the v1model program(s) into $(BUILD_DIR)/ (P4_DEFINES=-D...)"
	@echo "  make build-tna    type-check or compile the Tofino (TNA) program"
	@echo "  make run          bring up TOPO=$(TOPO) of BMv2 switches, program it, open the Mininet CLI"
	@echo "  make smoke        bring up TOPO, check reachability and one broadcast, tear down"
	@echo "  make launch       bring up TOPO, run one workload (LAUNCH_ARGS), print the table"
	@echo "  make test         unit tests + single-switch data-plane tests (the CI tier)"
	@echo "  make test-e2e     every collective and algorithm on a Mininet dragonfly"
	@echo "  make test-e2e-subset  CI's e2e subset: each collective's in-network and one host"
	@echo "                   algorithm on a random subset of $(E2E_SUBSET_TOPO)"
	@echo "  make test-reliability  the CI-sized fault and fuzzing tier (minutes)"
	@echo "  make reliability  the full fault matrix on Df(2,4,2); writes docs/reliability.md"
	@echo "  make bench        side-by-side timings; writes $(RESULTS_DIR)/"
	@echo "  make calibrate    choose this machine's dilation of the papers' links; writes docs/calibration.json"
	@echo "  make reproduce    each paper's experiment on Df(2,4,2); writes docs/results.md"
	@echo "                   (REPRODUCE_ARGS='--profile full', '--resume', BMV2=speed build)"
	@echo "  make simulate     the same collectives on an ns-3 dragonfly (SIM_TOPO, SIM_ARGS); writes $(RESULTS_DIR)/"
	@echo "  make lint         ruff and mypy"
	@echo "  make stop         remove every process, namespace and interface a run left behind"
	@echo "  make clean        remove $(BUILD_DIR)/ and $(LOG_DIR)/"

# -- installation -------------------------------------------------------------------------

deps:
	$(SYSTEM_PYTHON) -m mininet_topos.tooling.environment deps

doctor:
	@$(SYSTEM_PYTHON) -m mininet_topos.tooling.environment doctor

need-venv:
	@test -x $(PY) || { echo "error: no virtual environment at $(VENV); run 'make deps' first" >&2; exit 1; }

need-p4c:
	@command -v $(P4C) >/dev/null 2>&1 || { \
	  echo "error: $(P4C) is not installed. Install p4lang's p4lang-p4c package ('make deps'" >&2; \
	  echo "       does it on Ubuntu 20.04-24.04), use the Vagrant VM, or build p4c from source." >&2; \
	  exit 1; }

need-bmv2:
	@command -v simple_switch_grpc >/dev/null 2>&1 || { \
	  echo "error: simple_switch_grpc (BMv2 with P4Runtime) is not installed." >&2; \
	  echo "       Install p4lang's p4lang-bmv2 and p4lang-pi packages ('make deps' does it on" >&2; \
	  echo "       Ubuntu 20.04-24.04), run 'vagrant up', or build behavioral-model with PI." >&2; \
	  echo "       'make doctor' shows what else is missing." >&2; \
	  exit 1; }

# -- the data plane ------------------------------------------------------------------------

build: need-p4c $(V1_JSON)

$(BUILD_DIR)/%.json: p4src/v1model/%.p4 $(P4_COMMON) $(wildcard p4src/v1model/*.p4)
	@mkdir -p $(@D)
	$(P4C) --std p4-16 --target bmv2 --arch v1model $(P4_DEFINES) -o $@ \
	    --p4runtime-files $(BUILD_DIR)/$*.p4info.txtpb $<

# Tofino: compiled for tofino and tofino2 where a Tofino compiler is installed (TNA_P4C, else
# bf-p4c, else p4c with p4c-barefoot), otherwise type-checked by p4test against tna.p4/t2na.p4
# from TNA_INCLUDE_DIR (else an installed p4c's share/p4c/p4include); skipped, saying so,
# when neither is there. A compile prints the stages and per-stage use from the compiler's
# resources.json; TNA_ARGS adds options (e.g. -D NETCOLL_AGG_LANES=16). docs/porting-to-tofino.md.
build-tna: need-venv
	$(PY) -m controller.tofino.build --program "$(TNA_PROGRAM)" --p4test "$(P4TEST)" \
	    --p4c "$(TNA_P4C)" --include-dir "$(TNA_INCLUDE_DIR)" --out $(BUILD_DIR)/tna $(TNA_ARGS)

# -- running a network ---------------------------------------------------------------------

# `make run` installs missing dependencies on first use, then needs BMv2.
run:
	@test -x $(PY) || $(MAKE) deps
	@$(MAKE) --no-print-directory need-bmv2 build
	$(PY) -m mininet_topos.network.run --topo $(TOPO) $(RUN_ARGS)

smoke: need-venv need-bmv2 build
	$(PY) -m mininet_topos.experiments.smoke --topo $(TOPO) $(RUN_ARGS)

# One workload on a fresh network: make launch LAUNCH_ARGS='--collective bcast --sizes 1,1024'
launch: need-venv need-bmv2 build
	$(PY) -m mininet_topos.experiments.launch --topo $(TOPO) $(LAUNCH_ARGS)

stop:
	@if test -x $(PY); then $(PY) -m mininet_topos.tooling.stop; else $(SYSTEM_PYTHON) -m mininet_topos.tooling.stop; fi

# -- tests ---------------------------------------------------------------------------------

# The CI tier: unit tests everywhere, data-plane tests where p4c, BMv2 and root are present.
test: need-venv
	@if [ -n "$(HAVE_P4C)" ]; then $(MAKE) --no-print-directory build; \
	 else echo "note: $(P4C) not found; data-plane tests will skip"; fi
	$(call run_pytest,-m "unit or dataplane or simulation")

test-e2e: need-venv need-bmv2 build
	$(call run_pytest,-m e2e)

# CI's e2e subset (marker e2e_subset): each collective's in-network algorithms and one host
# algorithm drawn from the test seed, on a random subset with a random root, on df:2,2,1.
E2E_SUBSET_TOPO ?= df:2,2,1
test-e2e-subset: need-venv need-bmv2 build
	NETCOLL_E2E_TOPO=$(E2E_SUBSET_TOPO) NETCOLL_E2E_SUBSET=1 $(call run_pytest,-m e2e_subset)

# The CI-sized fault tier (marker reliability): minutes, skips without BMv2 or root.
test-reliability: need-venv
	@if [ -n "$(HAVE_P4C)" ]; then $(MAKE) --no-print-directory build; fi
	$(call run_pytest,-m reliability)

# The full matrix on Df(2,4,2), within the budget it states; writes docs/reliability.md.
reliability: need-venv need-bmv2 build
	$(PY) -m mininet_topos.experiments.reliability --report docs/reliability.md $(RELIABILITY_ARGS)

bench: need-venv need-bmv2 build
	$(PY) -m mininet_topos.experiments.bench --out $(RESULTS_DIR) $(BENCH_ARGS)

# Each paper's own experiment on one network (quick profile: under 20 min on Df(2,4,2)
# with the speed build; --profile full: under 2 h); results file docs/results.json, report
# docs/results.md, plots docs/img/results-*.png. REPRODUCE_ARGS=--resume continues the file.
reproduce: need-venv need-bmv2 build
	$(PY) -m mininet_topos.experiments.reproduce $(REPRODUCE_ARGS)

# The dilation factor of the papers' links for this machine (--dilation auto reads it): pilot
# cells on the dilated links until the heaviest offers at most 40% of the cores.
CALIBRATE_ARGS ?=
calibrate: need-venv need-bmv2 build
	$(PY) -m mininet_topos.experiments.calibrate $(CALIBRATE_ARGS)

# The collectives on ns-3 instead of BMv2 (no root, no BMv2): make simulate SIM_TOPO=df:6,12,6
# SIM_ARGS='--run scatter:tree,lin:1024'. docs/scale.md.
simulate: need-venv
	$(PY) -m mininet_topos.ns3sim --topo $(SIM_TOPO) --out $(RESULTS_DIR) $(SIM_ARGS)

lint: need-venv
	$(PY) -m ruff check controller mininet_topos host_agents tests
	$(PY) -m ruff format --check controller mininet_topos host_agents tests
	$(PY) -m mypy

format: need-venv
	$(PY) -m ruff format controller mininet_topos host_agents tests
	$(PY) -m ruff check --fix controller mininet_topos host_agents tests

clean:
	rm -rf $(BUILD_DIR) $(LOG_DIR)
