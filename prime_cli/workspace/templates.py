"""The files `prime lab setup` writes: endpoint registry, eval / GEPA / RL configs, .gitignore."""

from __future__ import annotations

from dataclasses import dataclass

EMBEDDED_MODEL_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
"""The Hugging Face id of the embedded default model (`-m local`, `[model] name = "local"`)."""


@dataclass(frozen=True)
class Example:
    env_id: str
    num_examples: int = 10
    rollouts_per_example: int = 2
    max_tokens: int = 512
    perfect_score: float = 1.0  # the highest reward: the sum of the reward weights
    needs_data: str = ""  # how to point the environment at its data, for a config comment


EXAMPLES = (
    Example("reverse-text", perfect_score=1.2),
    Example("alphabet-sort", perfect_score=1.2),
    Example("gsm8k", perfect_score=1.2, needs_data="set PRIME_DATA_DIR to a folder with gsm8k/train.jsonl and test.jsonl, "
                                "or env_args = { data_dir = \"...\" }"),
    Example("wordle", max_tokens=256, perfect_score=2.0),
    Example("math-python", needs_data="set PRIME_DATA_DIR (gsm8k/ JSONL files) or env_args = { data_dir = \"...\" }"),
    Example("wiki-search", needs_data="set PRIME_DATA_DIR (hotpotqa/dev_distractor_sample.jsonl) or "
                                      "env_args = { corpus_path = \"...\" }"),
)

ENDPOINTS = '''# Endpoint registry: `prime eval run ENV -m <endpoint_id>`.
# `key` names the environment variable holding the API key; never put a key in this file.
# Several blocks with one endpoint_id are replicas, used round-robin per example group.

# `-m local` (the default) is built in: the embedded SmolLM2-135M-Instruct served by vLLM on this
# machine (`prime serve`, or started for the run). It needs no entry here.

# OpenAI (OPENAI_API_KEY)
[[endpoint]]
endpoint_id = "gpt-4.1-mini"
model = "gpt-4.1-mini"
url = "https://api.openai.com/v1"
key = "OPENAI_API_KEY"

[[endpoint]]
endpoint_id = "gpt-4.1-nano"
model = "gpt-4.1-nano"
url = "https://api.openai.com/v1"
key = "OPENAI_API_KEY"

# OpenRouter (OPENROUTER_API_KEY)
[[endpoint]]
endpoint_id = "qwen3-8b"
model = "qwen/qwen3-8b"
url = "https://openrouter.ai/api/v1"
key = "OPENROUTER_API_KEY"

# Together AI (TOGETHER_API_KEY)
[[endpoint]]
endpoint_id = "llama-3.1-8b"
model = "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"
url = "https://api.together.xyz/v1"
key = "TOGETHER_API_KEY"

# DeepSeek (DEEPSEEK_API_KEY)
[[endpoint]]
endpoint_id = "deepseek-chat"
model = "deepseek-chat"
url = "https://api.deepseek.com/v1"
key = "DEEPSEEK_API_KEY"

# Package indexes: where `prime env push` publishes environments and `prime env install OWNER/my-env`
# installs them from (any index with the standard upload and simple APIs: pypiserver, devpi, a cloud
# package registry). Uncomment and fill in one table per index:
#
# [[index]]
# name = "my-team"                          # the OWNER in `prime env install my-team/my-env`
# url = "https://pypi.example.com/simple/"  # the simple index pip installs from
# upload_url = "https://pypi.example.com/"  # where `prime env push` uploads (default: url without simple/)
# user = "__token__"                        # the user name on the index (default: __token__)
# token = "MY_TEAM_INDEX_TOKEN"             # the NAME of the variable holding the token, never the token
# visibility = "private"                    # `prime env push --visibility private` picks this index
#
# ~/.pypirc (twine's file) is read too: each section is an index named after it, with `repository` the
# upload URL, `username` and `password`; pip reads repository + simple/ unless the section sets simple_url.
'''

GITIGNORE = '''# prime outputs: eval runs, GEPA runs, training checkpoints
outputs/
environments/*/outputs/
environments/*/dist/
environments/*/build/
__pycache__/
*.egg-info/
.venv/
'''


def _data_note(example: Example) -> str:
    return f"# Data: {example.needs_data}.\n" if example.needs_data else ""


def eval_config(example: Example) -> str:
    return f'''# prime eval run configs/eval/{example.env_id}.toml   (flags such as -m MODEL override these keys)
{_data_note(example)}model = "local"
save_results = true

[[eval]]
env_id = "{example.env_id}"
num_examples = {example.num_examples}
rollouts_per_example = {example.rollouts_per_example}
max_tokens = {example.max_tokens}
'''


def gepa_config(example: Example) -> str:
    return f'''# prime gepa run configs/gepa/{example.env_id}.toml: optimise the system prompt of {example.env_id}.
{_data_note(example)}env_id = "{example.env_id}"
model = "local"
reflection_model = "gpt-4.1-mini"
max_calls = 500
num_train = 50
num_val = 20
minibatch_size = 3
perfect_score = {example.perfect_score}
state_columns = []
'''


GPU_STEPS, GPU_BATCH = 100, 64  # the size of every example's training config


def _gpu_note(example: Example, cpu_config: str | None) -> str:
    """Says that the training config is sized for a GPU, and what to run on a CPU instead."""
    lines = [f"This config is sized for a GPU: {GPU_STEPS} steps x {GPU_BATCH} rollouts x up to "
             f"{example.max_tokens} tokens takes hours on a CPU."]
    if cpu_config:
        lines += [f"Without a GPU, run {cpu_config} (20 steps x 16 rollouts x 48 tokens: about",
                  "5.5 minutes measured on a CPU), or lower max_steps, batch_size and max_tokens (here or with --set)."]
    else:
        lines += ["Without a GPU, lower max_steps, batch_size and max_tokens (here or with --set KEY=VALUE)."]
    return "".join(f"# {line}\n" for line in lines)


def rl_config(example: Example, cpu_config: str | None = None) -> str:
    """configs/rl/: the hosted shape the verifiers training guide prints (the same run as configs/prime-rl/).
    `cpu_config`: the workspace's CPU-sized config, named in the comment."""
    return f'''# prime train configs/rl/{example.env_id}.toml: LoRA RL on {example.env_id} (hosted shape; the same run in
# the prime-rl v0.4 shape is configs/prime-rl/{example.env_id}.toml). Every key: docs/trainer.md.
# Check it without starting anything: prime train configs/rl/{example.env_id}.toml --dry-run
{_gpu_note(example, cpu_config)}{_data_note(example).replace("env_args = ", "[[env]] args = ")}model = "local"               # the embedded {EMBEDDED_MODEL_HUB_ID.split("/")[-1]}; or a Hugging Face id / folder
max_steps = {GPU_STEPS}
batch_size = {GPU_BATCH}               # rollouts per step: must be divisible by rollouts_per_example
rollouts_per_example = 8
learning_rate = 1e-4
lora_rank = 16
lora_alpha = 32
inference_gpu_ids = [0]       # GPUs for vLLM and for the trainer (ignored without CUDA)
trainer_gpu_ids = [0]
seq_len = 2048                # longest training sample; at least inference.model.max_model_len
output_dir = "outputs/rl/{example.env_id}"
# env_file = ["secrets.env"]  # KEY=VALUE lines for every part (API keys); never written to the run folder

[sampling]
max_tokens = {example.max_tokens}
temperature = 1.0

[[env]]
id = "{example.env_id}"

[checkpointing]
save_every_n_steps = 10       # checkpoints/step_N for --resume-step N

[inference.model]
max_model_len = 2048
'''


def prime_rl_config(example: Example, cpu_config: str | None = None) -> str:
    return f'''# prime train configs/prime-rl/{example.env_id}.toml: LoRA RL on {example.env_id} (prime-rl v0.4 shape).
# Check it without starting anything: prime train configs/prime-rl/{example.env_id}.toml --dry-run
# Override a key on the command line: --set trainer.optim.lr=3e-4 (see prime train --help).
{_gpu_note(example, cpu_config)}{_data_note(example).replace("env_args = ", "[[orchestrator.env]] args = ")}inference_gpu_ids = [0]       # GPUs for vLLM and for the trainer (ignored without CUDA)
trainer_gpu_ids = [0]
max_steps = {GPU_STEPS}
seq_len = 2048                # longest training sample; at least inference.model.max_model_len
output_dir = "outputs/rl/{example.env_id}"

[model]
name = "local"                # the embedded {EMBEDDED_MODEL_HUB_ID.split("/")[-1]}; or a Hugging Face id / folder

[trainer.optim]
lr = 1e-4

[trainer.model.lora]
rank = 16
alpha = 32

[trainer.ckpt]
interval = 10                 # checkpoints/step_N for --resume-step N

[orchestrator]
batch_size = {GPU_BATCH}               # rollouts per step: must be divisible by rollouts_per_example
rollouts_per_example = 8

[orchestrator.sampling]
max_tokens = {example.max_tokens}
temperature = 1.0

[[orchestrator.env]]
id = "{example.env_id}"

[inference.model]
max_model_len = 2048
'''
