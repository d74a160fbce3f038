# The two commands of the README: `make demo` and `make test`. Both create .venv when needed.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: demo test lint unit

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "fleetmedic needs Python >= 3.11 (found $$($(PYTHON) --version))"; exit 1; }
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV) || \
		{ echo "cannot create .venv: on Debian/Ubuntu run: apt-get install python3-venv"; exit 1; }
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	@rm -f $(VENV)/.installed-*; touch $@

demo: $(STAMP)
	$(VENV)/bin/fleetmedic demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# The explain and rule tests are pure CPU (explain_text, at most a temporary SQLite file), so
# they run in a second pytest beside the rest: one process a core on a 2-core machine.
EXPLAIN_TESTS := $(sort $(wildcard tests/correlator/test_explain_*.py tests/correlator/test_rules_*.py))

test: $(STAMP) lint
	bash tests/system_deps.sh
	$(VENV)/bin/pytest $(PYTEST_ARGS) $(EXPLAIN_TESTS) > .pytest-explain.log 2>&1 & explain=$$!; \
	$(VENV)/bin/pytest $(PYTEST_ARGS) $(addprefix --ignore=,$(EXPLAIN_TESTS)); rest=$$?; \
	wait $$explain; ex=$$?; cat .pytest-explain.log; \
	echo "explain and rule tests: exit $$ex; the other tests: exit $$rest"; \
	[ $$rest -eq 0 ] && [ $$ex -eq 0 ]

unit: $(STAMP)
	$(VENV)/bin/pytest -m "not slow and not integration" $(PYTEST_ARGS)
