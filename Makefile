# Two commands set everything up on a fresh machine with only Python 3.11:
#   make demo   -- creates .venv, installs the package with its torch and transformers extras, runs the main job on a tiny Llama
#   make test   -- creates .venv, installs with the test extras, runs ruff and mypy --strict, then the whole test suite
# `make venv` alone creates or updates .venv; it is a no-op when pyproject.toml and constraints.txt are unchanged.
# `make docs` builds the documentation site (docs/, mkdocs.yml) strictly into site/.
# `make accel` compiles the LALR engine and the schema callbacks with mypyc (needs a C compiler); nothing else needs it,
# the pure code is the fallback.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
# The dev/CI environment pins torch to the CPU wheel on disk (constraints.txt); pyproject.toml keeps a range, and
# torch is an extra (the schema tooling installs without it): the transformers and test extras bring it.
PIN    := -c constraints.txt

FUZZ_SECONDS ?= 180
EXPORT_FUZZ_EXAMPLES ?= 300

.PHONY: venv venv-test demo test lint fuzz fuzz-export bench docs tables accel clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(BIN)/python pyproject.toml constraints.txt
	$(PIP) install $(PIN) -e '.[transformers]'
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml constraints.txt
	$(PIP) install $(PIN) -e '.[test,onnx,fuzz,bench,docs]'
	touch $@

venv: $(VENV)/.installed

venv-test: $(VENV)/.installed-test

demo: venv
	$(BIN)/python -m piece_by_piece_serialize demo

# The suite runs on two workers (pytest-xdist): its time is mostly torch tracing in Python, one core each. One
# thread per worker (and per process a test starts: the variable is inherited), so that the two do not share a
# core's threads. `pytest` alone runs it in one process.
test: venv-test lint
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2 --durations=15

# ruff on the package, mypy --strict on the package (both configured in pyproject.toml); part of make test
lint: venv-test
	$(BIN)/python -m ruff check src
	$(BIN)/python -m mypy

fuzz: venv-test
	$(BIN)/python fuzz/run_all.py --seconds $(FUZZ_SECONDS)

# the export's contract on random small models and dynamic shapes (tests/property/test_export_contract.py, long)
fuzz-export: venv-test
	$(BIN)/python fuzz/fuzz_export.py --examples $(EXPORT_FUZZ_EXAMPLES)

# the compiled engine first when mypyc and a C compiler are there (--if-possible: skipped with a message otherwise),
# so that the table has its rows beside the pure engine's
bench: venv-test
	$(BIN)/python bench/build_accel.py --if-possible --if-stale
	$(BIN)/python bench/run.py
	$(BIN)/python docs/build_readme.py  # docs/benchmarks.md shows the new bench/RESULTS.md

# The site: docs/*.md and the API reference from the docstrings (mkdocstrings); broken links or anchors fail it.
docs: venv-test
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict -d site

# Regenerate the LALR tables in src/piece_by_piece_serialize/_lalr/_generated/ after editing a grammar (tests check they agree).
tables: venv
	$(BIN)/python -m piece_by_piece_serialize._lalr.build

# The optional compiled engine and schema callbacks (bench/build_accel.py: stamped copies of _lalr/engine.py and
# schema/_transform.py, git-ignored); each used only while its stamp matches its sources, so a stale build is never run. mypyc comes with mypy, in the test extra.
accel: venv-test
	$(BIN)/python bench/build_accel.py

clean:
	$(BIN)/python bench/build_accel.py --clean 2>/dev/null || true
	rm -rf $(VENV) build dist site .pytest_cache .hypothesis
