"""Configs written from the two guides users copy from, each dry-run through the installed `prime train`:
the verifiers RL Training Guide (hosted shape) and the prime-rl training guide (v0.4 shape). Where a guide
names a placeholder environment ("my-env"), an installed one stands in; every other key is as printed.
The plan must show the documented meaning, not only load."""

from __future__ import annotations

import pytest

from tests.train.support import run_train, write

VERIFIERS_ALPHABET_SORT = """
model = "Qwen/Qwen3-30B-A3B-Instruct-2507"
max_steps = 500
batch_size = 256
rollouts_per_example = 8

[sampling]
max_tokens = 512

[[env]]
id = "primeintellect/alphabet-sort"
args = { min_turns = 3, max_turns = 5, power_per_turn = false }

[wandb]
project = "alphabet-sort"
name = "qwen3-30b-i-alphabet-sort"
"""

VERIFIERS_REVERSE_TEXT = """
# Qwen3.5 dense models. Uncomment exactly one model.
# model = "Qwen/Qwen3.5-0.8B"
model = "Qwen/Qwen3.5-4B"

max_steps = 100
batch_size = 128
rollouts_per_example = 8

[sampling]
max_tokens = 1024

[[env]]
id = "primeintellect/reverse-text"
"""

VERIFIERS_REFERENCE = """
model = "Qwen/Qwen3-30B-A3B-Instruct-2507"  # Base model
max_steps = 500                             # Training steps
batch_size = 256                            # Samples per gradient update
rollouts_per_example = 8                    # Rollouts per example for advantage

[sampling]
max_tokens = 512
temperature = 1.0

[[env]]
id = "primeintellect/alphabet-sort"
args = { min_turns = 3, max_turns = 5 }

[wandb]
project = "my-project"
name = "my-run"
"""

PRIME_RL_FULL = """
inference_gpu_ids = [0, 1, 2]
trainer_gpu_ids = [3]

max_steps = 500
seq_len = 16384

[wandb]
project = "my-project"
name = "my-run"

[model]
name = "Qwen/Qwen2.5-7B-Instruct"

[trainer.optim]
lr = 1e-5
weight_decay = 0.0

[trainer.tokenizer]
name = "Qwen/Qwen2.5-7B-Instruct"

[trainer.model.ac]
freq = 1

[trainer.model.lora]
rank = 32
alpha = 32
dropout = 0.05
target_modules = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

[orchestrator]
batch_size = 32
rollouts_per_example = 16
oversampling_factor = 2.0

[orchestrator.sampling]
max_tokens = 1024
temperature = 0.5

[orchestrator.buffer]
online_difficulty_filtering = true

[[orchestrator.env]]
id = "reverse-text"
args = { num_train_examples = 50 }

[inference]
gpu_memory_utilization = 0.6

[inference.model]
name = "Qwen/Qwen2.5-7B-Instruct"
enable_auto_tool_choice = true
tool_call_parser = "hermes"
max_model_len = 16384
"""

# the guide's later blocks, each added to the full example as a user would
THINKING = """
[inference.model]
name = "Qwen/Qwen2.5-7B-Instruct"
enable_auto_tool_choice = true
tool_call_parser = "hermes"
max_model_len = 16384
reasoning_parser = "qwen3"
"""
DTYPES = """
[trainer.model]
optimization_dtype = "bfloat16"
reduce_dtype = "bfloat16"
fsdp_cpu_offload = true
"""
CKPT = """
[trainer.ckpt]
interval = 10
keep_last = 3
keep_interval = 50
"""


def _with(base: str, block: str, replaces: str | None = None) -> str:
    if replaces:
        start = base.index(replaces)
        end = base.find("\n[", start + 1)
        base = base[:start] + base[end + 1:] if end != -1 else base[:start]
    return base + block


def dry_run(tmp_path, text: str):
    path = write(tmp_path, text)
    result = run_train([str(path), "--dry-run"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_verifiers_alphabet_sort(tmp_path):
    out = dry_run(tmp_path, VERIFIERS_ALPHABET_SORT)
    assert "batch_size 256 = 32 examples x 8 rollouts" in out and "max_tokens 512" in out
    assert 'project = "alphabet-sort"' in out and "500 steps" in out
    assert MOE_ADAPTERS in out and "(max rank 32)" in out  # gate_up's rank 2r


# Qwen3-30B-A3B is a Mixture-of-Experts model: the plan names the adapted expert weights (from the public
# config kept in prime_cli/train/model_facts.py; nothing is downloaded)
MOE_ADAPTERS = ("LoRA rank 16, alpha 32 on a Mixture-of-Experts model (128 experts, 8 active per token): attention "
                "q_proj, k_proj, v_proj, o_proj; each of the 128 experts' gate_up_proj (gate and up fused, rank 32) "
                "and down_proj (rank 16); router not adapted")


def test_verifiers_reverse_text(tmp_path):
    out = dry_run(tmp_path, VERIFIERS_REVERSE_TEXT)
    assert "model Qwen/Qwen3.5-4B" in out and "batch_size 128 = 16 examples x 8 rollouts" in out
    assert "on q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj (the model's config is not at hand" in out


def test_verifiers_reference(tmp_path):
    out = dry_run(tmp_path, VERIFIERS_REFERENCE)
    assert "temperature 1.0" in out and MOE_ADAPTERS in out


def test_verifiers_byo_harness_is_refused_in_one_line(tmp_path):
    text = VERIFIERS_REVERSE_TEXT + "\n[env.harness]\nmax_turns = 8\n"
    text = text.replace("[[env]]", "[env]")
    result = run_train([str(write(tmp_path, text)), "--dry-run"], cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1
    assert "BYO-harness" in result.stderr


def test_prime_rl_full_example(tmp_path):
    out = dry_run(tmp_path, PRIME_RL_FULL)
    assert "vLLM on GPUs 0,1,2" in out and "tensor_parallel_size 1, data_parallel_size 3" in out
    assert "one process on GPU 3" in out
    assert "auto tool choice, tool_call_parser hermes" in out
    assert "activation checkpointing every 1 layer(s)" in out
    assert "filtering: groups with equal rewards dropped" in out
    assert "batch_size 32 = 2 examples x 16 rollouts" in out


@pytest.mark.parametrize(("block", "replaces", "shown"), [
    (THINKING, "[inference.model]", "reasoning_parser qwen3"),
    (DTYPES, None, "LoRA weights and optimizer in bfloat16"),
    (CKPT, None, "checkpoint every 10 steps (newest 3 kept plus every step divisible by 50)"),
    ('\n[inference.model]\nname = "Qwen/Qwen2.5-7B-Instruct"\nmax_model_len = 16384\ndtype = "float16"\n',
     "[inference.model]", "dtype float16"),
    ('\n[orchestrator]\nbatch_size = 32\nrollouts_per_example = 16\noversampling_factor = 2.0\n'
     'trajectory_strategy = "branching"\n', "[orchestrator]\n", "multi-turn rollouts: branching"),
])
def test_prime_rl_guide_blocks(tmp_path, block, replaces, shown):
    assert shown in dry_run(tmp_path, _with(PRIME_RL_FULL, block, replaces))


def test_two_trainer_gpus_show_the_fsdp_dtypes(tmp_path):
    text = _with(PRIME_RL_FULL, DTYPES).replace("trainer_gpu_ids = [3]", "trainer_gpu_ids = [3, 4]")
    out = dry_run(tmp_path, text)
    assert "gradients reduced in bfloat16, CPU offload" in out


def test_simplified_prime_rl_shape(tmp_path):
    out = dry_run(tmp_path, """
model_name = "Qwen/Qwen2.5-1.5B-Instruct"
num_gpus = 2
tensor_parallel_size = 1
pipeline_parallel_size = 1
learning_rate = 1e-5
use_lora = true
lora_rank = 8
lora_alpha = 16
use_difficulty_filtering = true
difficulty_threshold = 0.01
batch_size = 16
rollouts_per_example = 4

[[env]]
id = "reverse-text"
""")
    assert "vLLM on GPU 0" in out and "one process on GPU 1" in out
    assert "LoRA rank 8, alpha 16" in out and "lr 1e-05" in out
    assert "groups with reward variance below 0.01 dropped" in out


def test_resume_step_has_the_prime_rl_spelling(tmp_path):
    path = write(tmp_path, 'model = "local"\nbatch_size = 8\nrollouts_per_example = 4\n[[env]]\nid = "reverse-text"\n')
    result = run_train([str(path), "--trainer.ckpt.resume-step", "50", "-o", str(tmp_path / "out")], cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "no checkpoint for step 50" in result.stderr


# the hosted-training guide's example with its secrets line where the guide prints it: after [wandb], so TOML
# reads it as wandb.env_file
HOSTED_ENV_FILE_AFTER_WANDB = VERIFIERS_REFERENCE.replace("primeintellect/alphabet-sort", "alphabet-sort") + """
env_file = ["secrets.env"]
"""

# the verifiers guide's prime-rl example, as printed (no GPU ids: num_gpus with tensor_parallel_size)
VERIFIERS_PRIME_RL = """
# Model and infrastructure
model_name = "Qwen/Qwen3-30B-A3B-Instruct-2507"
num_gpus = 8
tensor_parallel_size = 4

# Training parameters
max_steps = 1000
batch_size = 512
rollouts_per_example = 16
learning_rate = 1e-5

# Environment
[env]
id = "wiki-search"
args = { max_turns = 10, judge_model = "gpt-4.1-mini" }

# Sampling
[sampling]
max_tokens = 1024
temperature = 1.0

# W&B
[wandb]
project = "wiki-search"
name = "qwen3-30b-wiki"
"""

JUDGE_ENDPOINT = """
[[endpoint]]
endpoint_id = "gpt-4.1-mini"
model = "gpt-4.1-mini"
url = "https://api.openai.com/v1"
key = "OPENAI_API_KEY"
"""


def test_hosted_env_file_after_the_wandb_table(tmp_path):
    (tmp_path / "secrets.env").write_text("JUDGE_KEY=not-a-real-key\n")
    out = dry_run(tmp_path, HOSTED_ENV_FILE_AFTER_WANDB)
    notes = [line.strip() for line in out.splitlines() if "env_file" in line and "note:" in line]
    assert notes == ["note: env_file is a top-level key, but it follows the [wandb] header, so TOML reads it as "
                     "wandb.env_file; it is taken as the top-level env_file (move it above the first [table] header)"]
    assert f'env_file = ["{tmp_path / "secrets.env"}"]' in out  # the top-level key, resolved next to the config
    wandb = out[out.index("  [wandb]"):out.index("Plan:")]
    assert "env_file" not in wandb and "not-a-real-key" not in out


def test_verifiers_prime_rl_example_places_num_gpus_with_tensor_parallel(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "endpoints.toml").write_text(JUDGE_ENDPOINT)  # the judge the example names
    path = write(tmp_path, VERIFIERS_PRIME_RL)
    result = run_train([str(path), "--dry-run"], cwd=tmp_path, extra_env={"OPENAI_API_KEY": "not-a-real-key"})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "inference     vLLM on GPUs 0,1,2,3" in out
    assert "tensor_parallel_size 4, data_parallel_size 1" in out
    assert "torchrun --nproc_per_node 4 on GPUs 4,5,6,7" in out
    assert ("note: num_gpus = 8, tensor_parallel_size = 4 placed as prime-rl does, inference first: vLLM on GPUs 0-3 "
            "(1 replica of 4 GPUs: data_parallel_size 1), the trainer on GPUs 4-7") in out
    assert "batch_size 512 = 32 examples x 16 rollouts" in out and "lr 1e-05" in out
    assert MOE_ADAPTERS in out


def test_the_guides_judge_model_resolves_through_litellm_without_a_registry(tmp_path):
    """The verifiers RL guide's `judge_model = "gpt-4.1-mini"`, in a folder without configs/endpoints.toml:
    LiteLLM's model list names OpenAI, and its key is checked before anything starts."""
    path = write(tmp_path, VERIFIERS_PRIME_RL)
    result = run_train([str(path), "--dry-run"], cwd=tmp_path,
                       extra_env={"OPENAI_API_KEY": "not-a-real-key", "OPENAI_BASE_URL": ""})
    assert result.returncode == 0, result.stderr
    assert "judge gpt-4.1-mini: OpenAI via LiteLLM, key OPENAI_API_KEY" in result.stdout + result.stderr
    # without the key the dry run still plans (the config may be meant for another machine) and notes it;
    # a real run refuses it (tests/train/test_dry_run_elsewhere.py)
    missing = run_train([str(path), "--dry-run"], cwd=tmp_path, extra_env={"OPENAI_API_KEY": ""})
    assert missing.returncode == 0, missing.stderr[-2000:]
    notes = [line.strip() for line in missing.stdout.splitlines() if "OPENAI_API_KEY" in line]
    assert len(notes) == 1 and "judge model gpt-4.1-mini" in notes[0], notes
    assert "judge_api_key_var" in notes[0] and " -k " not in notes[0]
    assert "Traceback" not in missing.stderr


@pytest.mark.parametrize(("text", "expected"), [
    # more replicas where they fit: 2 of 3 GPUs, the trainer on the 2 left
    ("num_gpus = 8\ntensor_parallel_size = 3", "vLLM on GPUs 0-5 (2 replicas of 3 GPUs: data_parallel_size 2), "
                                               "the trainer on GPUs 6,7"),
    ("num_gpus = 4\n[inference]\ntensor_parallel_size = 2", "vLLM on GPUs 0,1 (1 replica of 2 GPUs: "
                                                            "data_parallel_size 1), the trainer on GPUs 2,3"),
])
def test_num_gpus_placements(tmp_path, text, expected):
    out = dry_run(tmp_path, f'model = "local"\nbatch_size = 8\nrollouts_per_example = 4\n{text}\n'
                            '[[env]]\nid = "reverse-text"\n')
    assert expected in out


@pytest.mark.parametrize(("text", "expected"), [
    ("num_gpus = 4\ntensor_parallel_size = 4", "error: num_gpus = 4, tensor_parallel_size = 4 leaves no GPU for the "
                                              "trainer: vLLM takes 4 GPUs (1 replica of 4) and the trainer at least "
                                              "one, so set num_gpus to at least 5"),
    ("tensor_parallel_size = 2", "error: tensor_parallel_size = 2 needs 2 inference GPUs, but inference_gpu_ids is not "
                                 "set (our default: [0])"),
    ("inference_gpu_ids = [0, 1, 2]\ntrainer_gpu_ids = [3]\ntensor_parallel_size = 2",
     "error: inference_gpu_ids lists 3 GPUs, which tensor_parallel_size = 2 does not divide"),
])
def test_gpu_layout_errors_name_what_the_user_wrote(tmp_path, text, expected):
    path = write(tmp_path, f'model = "local"\nbatch_size = 8\nrollouts_per_example = 4\n{text}\n'
                           '[[env]]\nid = "reverse-text"\n')
    result = run_train([str(path), "--dry-run"], cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip() == result.stderr.strip().splitlines()[0]
    assert result.stderr.startswith(expected), result.stderr
    assert "data_parallel_size" not in result.stderr  # a key the user did not write


def test_a_real_run_starts_with_the_notes(tmp_path, monkeypatch):
    """The note is printed once at the start of a real run too, before the plugin starts (a stub plugin here)."""
    from typer.testing import CliRunner

    import prime_cli.train.plugins as plugins
    from prime_cli.cli.main import app
    from prime_cli.train.config import RLConfig

    started = []

    class Stub:
        name, version, api_version, config_model = "stub", "0", 2, RLConfig

        def run(self, config, output_dir, resume_step=None, force=False, part=None, node_rank=0):
            started.append(config.env_file)
            return 0

        def run_slurm(self, config, output_dir, resume_step, dry_run, template, echo):
            raise AssertionError("no [slurm] table here")

    monkeypatch.setattr(plugins, "load_trainer", lambda name=None: Stub())
    (tmp_path / "secrets.env").write_text("JUDGE_KEY=x\n")
    path = write(tmp_path, 'model = "local"\nbatch_size = 8\nrollouts_per_example = 4\n[[env]]\nid = "reverse-text"\n'
                           '[wandb]\nproject = "p"\nenv_file = ["secrets.env"]\n')
    result = CliRunner().invoke(app, ["train", str(path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert started == [[str(tmp_path / "secrets.env")]]
    assert result.stderr.splitlines()[0].startswith("note: env_file is a top-level key, but it follows the [wandb]")


@pytest.mark.parametrize(("block", "expected"), [
    ("\n[trainer.model.lora]\ndropout = 0.05\n", "trainer.model.lora.dropout = 0.05 cannot apply to "
                                                 "Qwen/Qwen3-30B-A3B-Instruct-2507's fused expert weights"),
    ('\n[trainer.model.lora]\ntarget_modules = ["q_proj", "experts", "router"]\n',
     'trainer.model.lora.target_modules names "router": vLLM 0.32 does not serve a LoRA on an MoE router'),
    ("\n[inference]\nmax_lora_rank = 16\n", "inference.max_lora_rank (16) is below 32, the rank of "
                                            "Qwen/Qwen3-30B-A3B-Instruct-2507's fused gate_up expert adapters"),
])
def test_what_lora_cannot_do_on_the_moe_guide_model_is_one_line(tmp_path, block, expected):
    result = run_train([str(write(tmp_path, VERIFIERS_ALPHABET_SORT + block)), "--dry-run"], cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(f"error: {expected}")


def test_an_moe_architecture_without_a_known_vllm_layout_is_refused(tmp_path):
    """gpt-oss keeps gate and up interleaved in its fused experts: its expert adapters would reach vLLM wrong."""
    import json

    folder = tmp_path / "gpt-oss"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["GptOssForCausalLM"], "num_local_experts": 32,
                                                    "num_experts_per_tok": 4, "num_hidden_layers": 24}))
    text = VERIFIERS_ALPHABET_SORT.replace("Qwen/Qwen3-30B-A3B-Instruct-2507", str(folder))
    result = run_train([str(write(tmp_path, text)), "--dry-run"], cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "architecture GptOssForCausalLM, whose expert adapters prime train cannot hand to vLLM" in result.stderr
