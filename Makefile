# Two entry points a new user needs: `make demo` (set up, then run the main job) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The CPU build of torch. On a GPU machine, set TORCH_SPEC to the CUDA build you want.
TORCH_SPEC ?= torch==2.13.0
DEMO_ARGS ?= --env gym:CartPole-v1 --actors 2 --steps 20000

.PHONY: setup system-deps demo check test test-long lint clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install -q "$(TORCH_SPEC)"
	# uv resolves and downloads in parallel: ~45 s here where pip takes ~8 min. torch is already
	# there, so uv keeps it (uv does not read pip's find-links or constraints).
	$(BIN)/pip install -q uv
	$(BIN)/uv pip install --python $(BIN)/python -q -e ".[all,dev]"
	touch $@

setup: $(BIN)/.installed

# tmux, a docker engine, compose v1 and a Slurm cluster for the backend tests (Debian, as root);
# then terraform and its AWS provider mirror for the cloudwise tests, which no reachable registry
# ships: the script finds them (this project's machine image has both) or says how to get them.
system-deps:
	bash scripts/install-system-deps.sh
	bash scripts/check-terraform.sh

demo: setup
	$(BIN)/surreal launch ppo $(DEMO_ARGS)

# Three pytest-xdist workers: the slow training runs one at a time on one worker, the README's
# commands on another, the rest beside them (tests/conftest.py groups the tests; most of them
# wait on processes, timers or servers). PYTEST_WORKERS=0 runs serially.
PYTEST_WORKERS ?= 3
PYTEST_PARALLEL = $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder)

# Three tiers (CONTRIBUTING.md). `make check` is the inner loop: no system packages, no training
# beyond one small real run (tests/surreal/test_smoke.py), lint and the import contracts.
CHECK_MARKS = not slow and not long and not integration and not docker and not slurm and not tmux
check: setup
	$(BIN)/python -m pytest -q -ra --durations=15 -m "$(CHECK_MARKS)" $(PYTEST_PARALLEL)
	$(MAKE) --no-print-directory lint

# `make test` is every claim a user relies on, checked once; the multi-seed and long-budget
# learning claims (marker `long`) are `make test-long`, run before a release and whenever the
# learning code changes (CONTRIBUTING.md lists them and what still guards each in `make test`).
test: setup system-deps
	$(BIN)/python -m pytest -q -ra --durations=50 -m "not long" $(PYTEST_PARALLEL)

test-long: setup
	$(BIN)/python -m pytest -q -ra --durations=0 -m long -p no:xdist

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
