# Every target creates .venv on first use (needs only python3.11, make and pip).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test fuzz bench calibration lab lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/ppscope report data/incident/tp8 data/incident/pp8 data/incident/pp8-fixed \
		-o reports/incident-postmortem.html

test: $(STAMP)
	$(BIN)/python -m pytest

# The fuzz families (log, GPU, bench, metrics, run.toml, CLI, cache, capture's HTTP reads,
# planted secrets, cut JSONL tails and damaged middle lines, hostile numbers) with the long
# search budget; `make test` runs them on a few examples each. FUZZ_EXAMPLES=N sets the
# examples per test.
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz $(if $(FUZZ_EXAMPLES),PPSCOPE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES)) \
		$(BIN)/python -m pytest tests/fuzz -m fuzz --hypothesis-show-statistics

# The commands as users run them (parse, diagnose, report; the GPU trace's typed load), then
# the long-line check and the demo report. BENCH_BIG=1 adds a 10 GB run.
bench: $(STAMP)
	$(BIN)/python bench/commands.py
	$(BIN)/python bench/line_bench.py
	$(BIN)/python bench/report_bench.py --demo

# A report, not a test: ppscope's findings against drawn runs whose truth is known.
# CALIBRATION_RUNS=N sets the number of draws (60).
calibration: $(STAMP)
	$(BIN)/python bench/calibration.py

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/

lint: $(STAMP)
	$(BIN)/ruff check toolkit tests bench
	$(BIN)/ruff format --check toolkit tests bench

clean:
	rm -rf $(VENV) .pytest_cache
