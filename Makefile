# frpd: every target works from a fresh clone; the virtualenv lives in .venv/ (the newest versions of the
# dependencies), .venv-oldest/ for `make test-oldest` (the oldest supported ones, constraints/oldest.txt).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OLDEST := .venv-oldest
OLDEST_STAMP := $(OLDEST)/.installed

.PHONY: install sample-model demo test test-oldest bench paper-tables lint clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,safe,dask,plot,ann]'
	touch $(STAMP)

sample_data/model.pkl: $(STAMP) sample_data/credit.csv sample_data/train_model.py
	$(BIN)/python sample_data/train_model.py --data sample_data/credit.csv --out sample_data/model.pkl

sample-model: sample_data/model.pkl

demo: sample_data/model.pkl
	$(BIN)/frpd plan sample_data/credit.csv --model sample_data/model.pkl --schema sample_data/schema.toml \
		--applicants sample_data/applicants.csv --format table

test: sample_data/model.pkl
	$(BIN)/python -m pytest -q

# The same suite under the oldest supported versions (the tests train their own sample model with the
# virtualenv's scikit-learn; sample_data/model.pkl belongs to .venv/ and is not used here).
$(OLDEST_STAMP): pyproject.toml Makefile constraints/oldest.txt
	$(PYTHON) -m venv $(OLDEST)
	$(OLDEST)/bin/python -m pip install --quiet --upgrade pip
	$(OLDEST)/bin/python -m pip install --quiet -c constraints/oldest.txt -e '.[dev,safe,dask,plot]'
	touch $(OLDEST_STAMP)

test-oldest: $(OLDEST_STAMP)
	$(OLDEST)/bin/python -m pip check
	$(OLDEST)/bin/python -m pytest -q

bench: sample_data/model.pkl
	$(BIN)/python benchmarks/bench_select.py
	$(BIN)/python benchmarks/bench_graph.py
	$(BIN)/python benchmarks/bench_plan.py
	$(BIN)/python benchmarks/bench_policy.py
	$(BIN)/python benchmarks/bench_candidates.py
	$(BIN)/python benchmarks/bench_batch.py
	$(BIN)/python benchmarks/bench_startup.py
	$(BIN)/python benchmarks/bench_select_cli.py
	$(BIN)/python benchmarks/bench_onnx.py
	$(BIN)/python benchmarks/bench_skewed.py

# The paper's tables, the sparsity/margin comparison with DiCE and the audits on the real datasets (../shared/datasets); slow,
# not part of `make test`.
paper-tables: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[plot,bench]'
	$(BIN)/python benchmarks/paper_tables.py
	$(BIN)/python benchmarks/bench_graph_design.py --connect 20 --hubs 3,10
	$(BIN)/python benchmarks/bench_graph_design.py --dataset sba --n-applicants 100 --neighbors 10,30 --radius 0.4 \
		--connect 10,30,10+0.4 --hubs 10 --thetas 0.3,0.4,0.5
	$(BIN)/python benchmarks/bench_graph_design.py --bounds german,sba,bank,adult --bounds-applicants 100,200 \
		--thetas 0.9,0.5,0.4
	$(BIN)/python benchmarks/bench_sparsity.py
	$(BIN)/python benchmarks/bench_audit.py

lint: $(STAMP)
	$(BIN)/python -m pip install --quiet ruff
	$(BIN)/ruff check frpd_cli tests benchmarks

clean:
	rm -rf $(VENV) $(OLDEST) sample_data/model.pkl .pytest_cache
