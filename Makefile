# lbtheory — two commands on a fresh machine:
#   make demo   create .venv, install, analyse examples/three_cells.yaml, write out/three_cells.png
#   make test   create .venv if needed, install, run ruff and the whole test suite (CI runs this)
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint figures experiments benchmarks clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/lbtheory equilibrium examples/three_cells.yaml --plot out/three_cells.png

lint: $(STAMP)
	$(BIN)/ruff check lbtheory tests benchmarks experiments paper_figures examples

test: $(STAMP) lint
	OPENBLAS_NUM_THREADS=1 $(BIN)/python -m pytest -q

experiments: $(STAMP)
	@for f in experiments/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

# Figures only read results: each result file is made by its experiment when it is missing (an
# existing result is never re-run; `make experiments` or deleting the file re-runs it).
RES     := experiments/results
RESULTS := $(RES)/poa_braess/poa_vs_demand.json $(RES)/balanceroute/horizon.json \
           $(RES)/stability_chart/stability_chart.json $(RES)/fluid_six_policies/results.json

$(RES)/poa_braess/poa_vs_demand.json: | $(STAMP)
	$(BIN)/python experiments/poa_braess.py

$(RES)/balanceroute/horizon.json: | $(STAMP)  # also writes scaling.json, load_traces.json
	$(BIN)/python experiments/balanceroute.py

$(RES)/stability_chart/stability_chart.json: | $(STAMP)
	$(BIN)/python experiments/stability_chart.py

$(RES)/fluid_six_policies/results.json: | $(STAMP)
	$(BIN)/python experiments/fluid_six_policies.py

figures: $(RESULTS) | $(STAMP)
	@for f in paper_figures/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

benchmarks: $(STAMP)
	@for f in benchmarks/bench_*.py; do echo "== $$f"; OPENBLAS_NUM_THREADS=1 $(BIN)/python $$f || exit 1; done

clean:
	rm -rf out paper_figures/out experiments/results .pytest_cache .ruff_cache
