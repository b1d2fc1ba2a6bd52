"""The run's vLLM server: its options from the config (runtime LoRA loading, processed log-probs, the
sampling defaults off) and its process on the inference devices."""

from __future__ import annotations

from pathlib import Path

from prime_cli.train.plugin_api import (
    TEACHER_ADAPTER_NAME,
    RLConfig,
    ServerOptions,
    VllmServer,
    free_port,
    model_config,
    port_in_use,
    read_adapter,
    resolve_lora_targets,
)

from .devices import cpu_split, part_env

VLLM_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)


class InferenceServer(VllmServer):
    """vLLM on the inference devices."""

    def __init__(self, options: ServerOptions, log_path: Path, gpu_ids: list[int],
                 extra_env: dict[str, str] | None = None):
        super().__init__(options, log_path)
        self.gpu_ids, self.extra_env = gpu_ids, extra_env or {}

    def launch_spec(self) -> tuple[list[str], dict[str, str]]:
        command, env = super().launch_spec()
        env["VLLM_SERVER_DEV_MODE"] = "1"  # /reset_prefix_cache after each adapter load (orchestrator/weights.py)
        return command, {**part_env(self.gpu_ids, env, cpus=cpu_split()[0], part="inference"), **self.extra_env}


def teacher_adapter(config: RLConfig) -> Path | None:
    """The adapter a teacher ([orchestrator.teacher_model] or [orchestrator.teacher_rollout_model]) names, which
    the run's vLLM serves beside the policy under the name "teacher"."""
    orch = config.orchestrator
    teacher = orch.teacher_model or orch.teacher_rollout_model
    return Path(teacher.adapter).expanduser().resolve() if teacher is not None and teacher.adapter else None


def inference_options(config: RLConfig, model_path: str, served_name: str) -> ServerOptions:
    inference = config.inference
    lora = config.trainer.model.lora
    # an MoE model's fused gate_up adapters have rank 2r (prime_cli/train/lora_targets.py)
    targets = resolve_lora_targets(list(lora.target_modules), lora.rank, lora.alpha, model_config(model_path))
    rank = inference.max_lora_rank or targets.max_rank(lora.rank)
    teacher = teacher_adapter(config)
    loras = {TEACHER_ADAPTER_NAME: teacher} if teacher is not None else {}
    if teacher is not None and inference.max_lora_rank is None:  # one --max-lora-rank holds both adapters
        rank = max(rank, read_adapter(teacher).rank)
    # processed_logprobs: log-probs after penalty, temperature and truncation, as the trainer computes them
    # (trainer/sampling.py). `--generation-config vllm`: no sampling defaults from the model's
    # generation_config.json (the orchestrator also sends every value explicitly, orchestrator/loop.py)
    extra = ["--logprobs-mode", "processed_logprobs", "--generation-config", "vllm", "--seed", str(config.seed)]
    dtype = config.inference_dtype
    if dtype != "auto":
        extra += ["--dtype", dtype]
    if inference.model.enable_auto_tool_choice:
        extra.append("--enable-auto-tool-choice")
    if inference.model.tool_call_parser:
        extra += ["--tool-call-parser", inference.model.tool_call_parser]
    if inference.model.reasoning_parser:
        extra += ["--reasoning-parser", inference.model.reasoning_parser]
    if inference.tensor_parallel_size > 1:
        extra += ["--tensor-parallel-size", str(inference.tensor_parallel_size)]
    if inference.data_parallel_size > 1:
        extra += ["--data-parallel-size", str(inference.data_parallel_size)]
    port = inference.port if not port_in_use(inference.host, inference.port) else free_port(inference.host)
    return ServerOptions(
        model_path=Path(model_path), served_names=[served_name], host=inference.host, port=port,
        # the teacher adapter and the policy in the same batches: two LoRA slots
        enable_lora=True, max_lora_rank=next((r for r in VLLM_LORA_RANKS if r >= rank), rank), max_loras=1 + len(loras),
        loras=loras,
        max_model_len=inference.model.max_model_len, gpu_memory_utilization=inference.gpu_memory_utilization,
        kv_cache_gib=inference.kv_cache_gib, extra_args=extra + list(inference.vllm_args))
