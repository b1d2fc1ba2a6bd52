"""The public API of prime for trainer plugins: a plugin imports prime_cli only through this module and
`prime_cli.envs` (the environment API), so prime's internal modules can move without breaking it (an
import-linter contract in pyproject.toml checks plugins/prime-lora). Importing it stays cheap: no torch.

- The contract: `TrainerPlugin` (the entry-point object) and `API_VERSION`.
- The config the TOML file is validated into: `RLConfig` and its sections.
- The weights a run trains: `training_weights(name)` (`"local"` is the embedded model, `"local-moe"` the MoE upcycled from it); `model_config(name)`
  its config.json without loading it; `resolve_lora_targets` what its LoRA adapts (`LoraTargets`: peft's
  target_modules / target_parameters, with the fused experts of a Mixture-of-Experts model, and one line
  that says so); `moe_shape(config)` a config's routed experts (None: dense).
- Inference: `VllmServer` / `ServerOptions` start a vLLM server; `ManagedProcess` runs a child process
  group; `free_port`, `port_in_use`, `served_models` (what a server at a URL lists, None when nothing
  answers); `ServeError` when a server cannot run; `load_adapter` hot-loads
  a PEFT adapter (`AdapterLoadError` when refused; an MoE adapter's `VLLM_ADAPTER_SUBDIR`, vLLM's
  per-expert layout, is loaded when present: `vllm_adapter_path`), `server_root` is a base URL without `/v1`.
- Secrets: `env_file_values(config.env_file)`, the variables every part of a run gets (never written).
- Sampling: `OpenAIChatClient` for an `EndpointSpec` (token ids and logprobs as the server returns them).
- The output directory: `TrainingRunLayout` names every file and step folder; `TrainingSample` is one
  line of a step's batch.jsonl; `steps_in` lists a folder's step_N; `write_text_atomic` /
  `write_json_atomic` rewrite a file so that a reader never sees half of it; `read_json_lines` reads a
  run's JSON-lines file by prime's one rule (a torn last line left out, any other bad line a
  `JsonLinesError` naming file:line), `parse_whole_line` one line a tail read whole, `JsonLinesAppender`
  appends to one and `append_json_line` one line (a torn last line cut away first: a run killed mid-write,
  then resumed). Ownership and use:
  `fresh_start` / `fresh_start_refusal` (what a fresh start may delete; `entries_listing` names such
  entries), `read_manifest` /
  `write_manifest` (the mark of a prime run's folder, starting with the run's versioned header;
  `set_manifest_status` records running / completed / failed / stopped there), `FolderLock` (one run per folder, `FolderBusy`);
  `RunDirError` is the one error of a folder that does not fit the request (a UserInputError: one line).
- A warm start: `check_initial_adapter(config)` (does `[model] adapter = PATH` fit the run's LoRA: None, else
  one line), `adapter_path(config)` the folder it names.
- Resume checks: `check_resume` (may a run resume at a step with a config: a whole checkpoint, checked
  without torch, and a config change the checkpoint can take; else one line in `ResumeConfigError`).
- Online evals: `evaluate_policy(...)` runs an ordinary eval run of the served policy into a folder
  (the eval engine's `prime_cli.evals.in_training`, imported when first called) and returns a `PolicyEval`;
  `read_evals` reads evals.jsonl, `eval_summary_line` formats one of its lines. A `PolicyEval.status` is a
  `RunStatus`; `FINISHED` holds those of a run that evaluated every rollout.
- SFT data: `read_source(source, base)` reads one [[data.source]] into `Conversation`s (`SourceRows`, with its
  bad rows by reason; `describe_bad` says them in one line; `TrainConfigError`, a source that cannot be read); the orchestrator
  tokenizes them.
- Teachers (issue 42): `TEACHER_ADAPTER_NAME`, the name the run's vLLM serves a teacher adapter under
  (`read_adapter` gives its rank); `served_model_cards`, a server's /v1/models entries (vLLM's list the
  context length); `rollout_row` makes a teacher's rollout a `Conversation` (`RowProblem` when it cannot be one).
- Evaluating the result as it was trained (issue 54): `trained_env_args(config_dict, env_id)` the env args a
  run gave an environment (the rule the checkpoint sweep reads OUT/config.json by), `env_args_flag(args)` them
  as ` -a '{...}'` for a printed `prime eval run` command.
- Terminal output: `visible(text)` writes the control characters of a model's or an environment's words
  (an error a part reports, an error kind) as escapes, as every prime command shows them.
"""

from prime_cli.clients import EndpointSpec, OpenAIChatClient
from prime_cli.records.json_lines import (
    JsonLinesAppender,
    JsonLinesError,
    append_json_line,
    parse_whole_line,
    read_json_lines,
)
from prime_cli.records.online_evals import eval_summary_line, read_evals
from prime_cli.records.training_folder import (
    FolderBusy,
    FolderLock,
    entries_listing,
    fresh_start,
    fresh_start_refusal,
    read_manifest,
    set_manifest_status,
    write_manifest,
)
from prime_cli.results.error_budget import clearly_over_budget
from prime_cli.runs.atomic import write_json_atomic, write_jsonl_atomic, write_text_atomic
from prime_cli.runs.layouts import steps_in
from prime_cli.runs.metadata import RunDirError
from prime_cli.runs.status import FINISHED, RunStatus
from prime_cli.runs.tasks import gather_or_cancel
from prime_cli.runs.training_env_args import env_args_flag, trained_env_args
from prime_cli.runs.visible import visible
from prime_cli.serve.errors import ServeError
from prime_cli.serve.lora_runtime import (
    AdapterLoadError,
    load_adapter,
    served_model_cards,
    server_root,
)
from prime_cli.serve.model_dir import VLLM_ADAPTER_SUBDIR, read_adapter, vllm_adapter_path
from prime_cli.serve.process import ManagedProcess
from prime_cli.serve.server import ServerOptions, VllmServer, free_port, port_in_use, served_models

from .config import BufferConfig, LossConfig, RLConfig
from .config_sft import TEACHER_ADAPTER_NAME
from .contract import API_VERSION, TrainerPlugin
from .env_file import env_file_values
from .initial_adapter import adapter_path, check_initial_adapter
from .lora_targets import MOE_ARCHITECTURES, LoraTargets, moe_shape, resolve_lora_targets
from .model_facts import model_config, model_folder
from .models import TrainingWeights, training_weights
from .resume_check import ResumeConfigError, check_resume
from .samples import TrainingRunLayout, TrainingSample
from .sft_data import Conversation, SourceRows, TrainConfigError, describe_bad, read_source
from .sft_rows import RowProblem, rollout_row


async def evaluate_policy(*args, **kwargs):
    """prime_cli.evals.in_training.evaluate_policy (the eval engine loads only when a run evaluates)."""
    from prime_cli.evals.in_training import evaluate_policy as run  # lazy: heavy

    return await run(*args, **kwargs)


__all__ = [
    "API_VERSION", "AdapterLoadError", "BufferConfig", "EndpointSpec", "FINISHED", "FolderBusy", "FolderLock",
    "LoraTargets", "LossConfig", "MOE_ARCHITECTURES",
    "ManagedProcess", "OpenAIChatClient", "RLConfig", "ResumeConfigError", "RunDirError", "RunStatus",
    "ServeError", "ServerOptions", "TrainerPlugin", "TrainingRunLayout", "TrainingSample", "TrainingWeights",
    "VllmServer", "adapter_path", "check_initial_adapter", "check_resume", "entries_listing", "env_file_values", "eval_summary_line",
    "evaluate_policy", "free_port", "fresh_start", "fresh_start_refusal", "gather_or_cancel", "load_adapter",
    "model_config", "model_folder", "moe_shape", "port_in_use", "read_evals", "read_manifest", "resolve_lora_targets", "set_manifest_status", "served_models", "server_root", "steps_in", "training_weights",
    "clearly_over_budget",  # the max_error_rate stop rule the eval uses too (issue 56)
    # SFT data (issue 42)
    "Conversation", "SourceRows", "TrainConfigError", "describe_bad", "read_source",
    # teachers (issue 42)
    "RowProblem", "TEACHER_ADAPTER_NAME", "read_adapter", "rollout_row", "served_model_cards",
    "JsonLinesAppender", "JsonLinesError", "append_json_line", "parse_whole_line", "read_json_lines",
    "VLLM_ADAPTER_SUBDIR", "env_args_flag", "trained_env_args", "visible", "vllm_adapter_path", "write_json_atomic", "write_jsonl_atomic", "write_manifest", "write_text_atomic",
]
