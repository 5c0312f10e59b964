# Thin aliases: CI calls the same targets a person does.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

# zsh and fish, which the activation and completion tests source (bash and sh are always there):
# apt-get as root, else Debian's packages unpacked into the venv (scripts/test-shells.sh).
test-shells:
	@VENV=$(VENV) bash scripts/test-shells.sh

# Slurm with munge for the cluster tests (tests/slurmcluster.py starts its daemons): slurmd runs
# jobs as their users only as root, so root and apt-get only, as in CI.
test-deps: test-shells
	@PATH="$$PATH:/usr/sbin"; command -v slurmd >/dev/null && command -v srun >/dev/null && command -v munged >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null; } || echo "slurm-wlm/munge not installed (needs root): the Slurm tests will say so"

.PHONY: test-shells test-deps install lint type test test-real test-train-refs smoke-wheel test-heavy bench bench-heavy lock lock-check gpu-check schema clean

install:  ## the tool and its dev tools, into ./.venv
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/python -m compileall -q verl_bootstrap  # editable: pip compiled its deps, not this tree

lint:
	$(BIN)/ruff check verl_bootstrap tests bench
	$(BIN)/ruff format --check verl_bootstrap tests bench
	$(BIN)/mypy

# the fast tier's test processes: its tests wait on subprocesses far more than they compute, and
# each file stays in one process (--dist loadfile), so a module's fixtures are made once
TEST_WORKERS ?= 2

test: test-shells  ## the fast tier (zsh and fish first): everything but the slow real runs (real_slow) and the tiers below
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile -m "not heavy and not gpu and not wheel and not train_refs and not real_slow" tests

test-real: test-deps  ## the slow real runs (Slurm first): full installs, Slurm and Ray end to end, training steps
	$(BIN)/pytest -m "real_slow and not heavy and not gpu and not wheel and not train_refs" tests

test-train-refs:  ## a cpu env at each older ref the cpu profile serves, and verify --train in it
	$(BIN)/pytest -m train_refs tests/test_train_refs.py

smoke-wheel:  ## the tool's wheel in a fresh venv plans every profile and variant as the checkout does
	$(BIN)/pytest -m wheel tests/test_wheel_smoke.py

test-heavy:  ## installs every GPU profile for real (several GB each); not in CI
	$(BIN)/pytest -m heavy -s tests

bench:
	$(BIN)/python bench/run.py

bench-heavy:  ## the committed cu130 GPU locks' install vs raw uv, nvcc builds for one GPU arch vs the default list (cu130 envs of several GB); not in make bench
	$(BIN)/python bench/bench_heavy.py --profile fsdp --profile sglang --profile vllm-only --profile megatron
	$(BIN)/python bench/bench_kernels_cuda.py
	$(BIN)/python bench/bench_flash_attn_unit.py

lock:  ## regenerate every committed lockfile (aarch64: cu130 only, see docs/aarch64.md)
	$(BIN)/verl-bootstrap lock --all
	for p in fsdp megatron sglang vllm-only; do $(BIN)/verl-bootstrap lock --profile $$p --cuda cu130 --platform linux-aarch64 || exit 1; done

lock-check:  ## every committed lockfile regenerates to itself, and every native library of its wheels links
	$(BIN)/verl-bootstrap lock --check --links

schema:  ## regenerate the JSON schemas checked into schemas/
	$(BIN)/python -m verl_bootstrap.schemas

gpu-check:  ## on a GPU host: doctor + the GPU smoke test against an existing PyTorch env
	bash scripts/gpu-check.sh

clean:
	rm -rf build dist .pytest_cache .mypy_cache .ruff_cache
