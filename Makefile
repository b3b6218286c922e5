# lbtheory — two commands on a fresh machine:
#   make demo   create .venv, install, analyse examples/three_cells.yaml, write out/three_cells.png
#   make test   create .venv if needed, install, run ruff and the whole test suite (CI runs this)
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint figures experiments benchmarks notebooks docs clean

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
	OPENBLAS_NUM_THREADS=1 $(BIN)/python -m pytest -q -n auto --dist worksteal

# Every experiment of experiments/*.py through the sweep runner (`lbtheory sweep`), on a local
# Dask cluster (one worker process per core). Resumable: each finished cell is cached under
# experiments/results/<name>/cells/, so an interrupted `make experiments` continues where it
# stopped. SWEEP="--quick" runs the CI profile; SWEEP="--scheduler tcp://host:8786" a real cluster.
SWEEP ?=

experiments: $(STAMP)
	OPENBLAS_NUM_THREADS=1 $(BIN)/lbtheory sweep --all --scheduler local $(SWEEP)

# Figures only read results: every paper figure from the committed summaries under
# experiments/results (a fresh clone: under a minute, no sweep). RESULTS=out/results draws the
# figures of `lbtheory sweep NAME --quick` runs instead. A script whose results are missing
# stops with exit code 2 and one line naming the sweep that writes them.
RESULTS ?= experiments/results

figures: $(STAMP)
	@for f in paper_figures/[!_]*.py; do echo "== $$f"; $(BIN)/python $$f --results $(RESULTS) || exit $$?; done

# Executed copies of the notebooks, with outputs, for reading on the repository page
# (docs/notebooks/); the sources in notebooks/ stay without outputs.
notebooks: $(STAMP)
	OPENBLAS_NUM_THREADS=1 $(BIN)/python tools/render_notebooks.py

# The documentation site (mkdocs-material + mkdocstrings): API reference from the docstrings,
# the rendered notebooks, DESIGN and THEORY; strict, so a broken link or reference fails.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

benchmarks: $(STAMP)
	@for f in benchmarks/bench_*.py; do echo "== $$f"; OPENBLAS_NUM_THREADS=1 $(BIN)/python $$f || exit 1; done

# keeps every committed result (summaries, claims.md); removes the per-cell sweep caches
clean:
	rm -rf out paper_figures/out site .cache .pytest_cache .ruff_cache
	if [ -d experiments/results ]; then find experiments/results -mindepth 2 -maxdepth 2 -name cells -type d -exec rm -rf {} +; fi
