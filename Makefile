# The two commands: `make demo` and `make test`. Both install what they need first.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
TEST_STAMP := $(VENV)/.test-extras-stamp
DOCS_STAMP := $(VENV)/.docs-extras-stamp
# --strict fails the build on a warning (never with --quiet, which hides them uncounted)
MKDOCS := NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
PYTHON ?= python3

.PHONY: install demo test lint docs bench clean

$(STAMP): pyproject.toml scripts/install-system.sh
	./scripts/install-system.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,mpi,postgres]'
	touch $(STAMP)

install: $(STAMP)

# Cubist is a GPL-3 extra: the tests install it so its code is tested; `make demo` stays
# free of GPL code.
$(TEST_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[cubist,docs]'
	touch $(TEST_STAMP)

# The site, from docs/ into site/: the CLI reference comes from the commands' own help and the
# API pages from the docstrings; --strict turns a broken link or a missing page into an error.
$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[docs]'
	touch $(DOCS_STAMP)

docs: install $(DOCS_STAMP)
	$(MKDOCS)

demo: install
	$(VENV)/bin/stortune demo

lint: install
	$(PY) -m ruff check src tests bench
	$(PY) -m ruff format --check src tests bench

# two workers: the Ceph files beside the local-machine files beside pure computation
# (tests/conftest.py groups them); then the tests that need the machine to themselves
test: install $(TEST_STAMP) lint
	$(MKDOCS)
	$(PY) -m pytest -q -n 2 -m "not quiet"
	$(PY) -m pytest -q -m quiet

bench: install
	$(PY) -m pip install -q -e '.[bench]'
	for b in bench/*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build site *.egg-info src/*.egg-info
