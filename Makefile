# rlrun: `make run` sets everything up and runs the default experiment; `make test` sets up and runs the tests.
# Set-up is idempotent: the virtual environment is (re)installed only when a pyproject.toml changes.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.rlrun-installed

.PHONY: install run test bench lint docs docs-serve ui constraints clean distclean

install: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# pip first (venv's bundled pip is old and has known vulnerabilities, e.g. CVE-2023-5752), then torch first and
# exactly (a CPU wheel of 2.13.0 is on the machine; any other version pulls GBs of CUDA packages), then the package
# with pip's default upgrade strategy, which keeps it, every version pinned by constraints.txt (the set CI installs;
# make constraints CONSTRAINTS= writes it again after a dependency changes; CONSTRAINTS= installs without it). Then
# the benchmarks, a project of their own (benchmarks/pyproject.toml: rlrun's wheel holds rlrun only), editable, so
# rlrun-bench runs this checkout's suite.
CONSTRAINTS ?= constraints.txt
$(STAMP): pyproject.toml benchmarks/pyproject.toml $(CONSTRAINTS) | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[dev]" $(if $(CONSTRAINTS),-c $(CONSTRAINTS))
	$(BIN)/python -m pip install -q -e ./benchmarks $(if $(CONSTRAINTS),-c $(CONSTRAINTS))
	touch $(STAMP)

# constraints.txt: the versions of every package the venv holds (make install resolved them from pyproject.toml).
constraints: install
	( echo "# Every package make install installs, at the version CI installs (make constraints CONSTRAINTS= writes it)"; \
	  $(BIN)/python -m pip freeze --exclude-editable --all | grep -v '^pip==' ) > constraints.txt

run: install
	$(BIN)/rlrun

# Two test processes, one per core of this machine class (pytest-xdist), each test file kept in one process (a
# module's fixture runs once): about half the time of one process, where three oversubscribe the two cores. The docs
# commands run from fork servers (tests/cli_fork_server.py), imports shared.
# TEST_WORKERS=0 runs the suite in this process; TEST_WORKERS=auto, one process per CPU. The 30 slowest tests are
# listed at the end (CI's log shows where the time goes).
TEST_WORKERS ?= 2
test: install
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=30

# The MLflow UI over ./mlflow.db: the full mlflow package (its web app; ~450 MiB more than the mlflow-skinny that
# records runs), at the installed mlflow-skinny's version, then rlrun ui.
ui: install
	$(BIN)/python -m pip install -q "mlflow==$$($(BIN)/python -c 'import importlib.metadata as m; print(m.version("mlflow-skinny"))')"
	$(BIN)/rlrun ui

# The CI benchmark set (benchmarks/suite.py): benchmarks/results/<date>-<commit>.json + .md, TensorBoard, MLflow;
# fails if a same-run ratio fell below benchmarks/baseline.json's tolerance or a benchmark failed.
bench: install
	$(BIN)/rlrun-bench ci

# The documentation site (mkdocs.yml, docs/): built strictly (a broken link or reference fails) into site/.
docs: install
	$(BIN)/mkdocs build --strict

docs-serve: install
	$(BIN)/mkdocs serve

lint: install
	$(BIN)/ruff check rlrun tests benchmarks

clean:
	rm -rf outputs multirun mlflow.db mlartifacts .pytest_cache build dist site *.egg-info
	find . -name __pycache__ -not -path "./$(VENV)/*" -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
