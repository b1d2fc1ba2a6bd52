"""One table from the config shapes users copy onto the keys `RLConfig` reads (see docs/trainer.md).

Three shapes are read, and may be mixed in one file:
- hosted (the verifiers guide): `model = "..."`, `batch_size`, `[sampling]`, `[[env]]` or one `[env]`,
  `weight`, `[checkpointing]`, `env_file`;
- the simplified prime-rl shape: `model_name`, `num_gpus`, `learning_rate`, `use_lora`, `lora_rank`, ...;
- prime-rl v0.4 spellings that differ from ours: `[trainer.ckpt] keep`, `[inference] dtype`.
A key that cannot apply on the user's own machines is refused with one line that says what to use.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import TrainConfigError

# (source, target): dotted paths; `[]` stands for every entry of a list. Applied in order, so a key moved
# by an earlier row (env -> orchestrator.env) is seen by a later one (orchestrator.env[].weight).
ALIASES: list[tuple[str, str]] = [
    ("model_name", "model.name"),
    ("batch_size", "orchestrator.batch_size"),
    ("rollouts_per_example", "orchestrator.rollouts_per_example"),
    ("oversampling_factor", "orchestrator.oversampling_factor"),
    ("max_async_level", "orchestrator.max_async_level"),
    ("max_concurrent", "orchestrator.max_concurrent"),
    ("trajectory_strategy", "orchestrator.trajectory_strategy"),
    ("sampling", "orchestrator.sampling"),  # top_p, top_k, min_p, repetition_penalty, temperature, max_tokens
    ("buffer", "orchestrator.buffer"),
    ("env", "orchestrator.env"),
    ("orchestrator.env[].weight", "orchestrator.env[].ratio"),
    ("learning_rate", "trainer.optim.lr"),
    ("lr", "trainer.optim.lr"),
    ("lora_rank", "trainer.model.lora.rank"),
    ("lora_alpha", "trainer.model.lora.alpha"),
    ("checkpointing.save_every_n_steps", "trainer.ckpt.interval"),
    ("checkpointing.keep_n_checkpoints", "trainer.ckpt.keep_last"),
    ("trainer.ckpt.keep", "trainer.ckpt.keep_last"),
    ("tensor_parallel_size", "inference.tensor_parallel_size"),
    ("inference.dtype", "inference.model.dtype"),
    ("use_difficulty_filtering", "orchestrator.buffer.online_difficulty_filtering"),
    ("difficulty_threshold", "orchestrator.buffer.min_reward_variance"),
]

# keys that are accepted only with one value (the only one that applies here); anything else is refused
FIXED: dict[str, tuple[Any, str]] = {
    "use_lora": (True, "use_lora = false: this trainer trains LoRA adapters only; remove use_lora or set it to true"),
    "pipeline_parallel_size": (1, "pipeline_parallel_size > 1 is not supported (vLLM runs tensor and data "
                                  "parallel here); use tensor_parallel_size or more inference_gpu_ids"),
}

# keys that only mean something on the hosted service
HOSTED_ONLY: dict[str, str] = {
    "orchestrator.env[].harness": "[env.harness] configures hosted v1 BYO-harness environments, which this trainer "
                                  "cannot run; pass settings through [[env]] args to load_environment instead",
    "orchestrator.env[].taskset": "[env.taskset] configures hosted v1 BYO-harness environments, which this trainer "
                                  "cannot run; pass settings through [[env]] args to load_environment instead",
}

_ITEM = re.compile(r"^([^\[\]]+)\[\]$")


def _split(path: str) -> list[str]:
    return path.split(".")


def _parents(data: dict[str, Any], parts: list[str]) -> list[tuple[dict[str, Any], str]]:
    """Every (table, last key) that `parts` names in data (several when a part is `name[]`)."""
    nodes: list[Any] = [data]
    for part in parts[:-1]:
        item = _ITEM.match(part)
        nxt: list[Any] = []
        for node in nodes:
            child = node.get(item.group(1) if item else part) if isinstance(node, dict) else None
            if item and isinstance(child, list):
                nxt.extend(c for c in child if isinstance(c, dict))
            elif not item and isinstance(child, dict):
                nxt.append(child)
        nodes = nxt
    return [(node, parts[-1]) for node in nodes if isinstance(node, dict)]


def _merge(target: dict[str, Any], key: str, value: Any, source: str, dest: str, taken: dict[str, str]) -> None:
    if key not in target:
        target[key] = value
        taken[dest] = source
    elif isinstance(target[key], dict) and isinstance(value, dict):
        for sub, inner in value.items():
            _merge(target[key], sub, inner, f"{source}.{sub}", f"{dest}.{sub}", taken)
    elif target[key] != value:
        raise TrainConfigError(f"{source} and {taken.get(dest, dest)} both set {dest} ({value!r} and "
                               f"{target[key]!r}): keep one of them")


def _place(root: dict[str, Any], parts: list[str], value: Any, source: str, taken: dict[str, str]) -> None:
    node = root
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise TrainConfigError(f"{source} maps to {'.'.join(parts)}, but {part} is not a table in this file")
        node = child
    _merge(node, parts[-1], value, source, ".".join(parts), taken)


def _move(data: dict[str, Any], source: str, target: str, taken: dict[str, str]) -> bool:
    src, dst = _split(source), _split(target)
    moved = False
    if "[]" in source:  # a key inside list entries: moved within each entry
        depth = next(i for i, p in enumerate(src) if p.endswith("[]"))
        for entry, key in _parents(data, src):
            if key in entry:
                _place(entry, dst[depth + 1:], entry.pop(key), source, taken)
                moved = True
        return moved
    for node, key in _parents(data, src):
        if key not in node:
            continue
        value = node.pop(key)
        if source == "env" and isinstance(value, dict):  # a single [env] table: one environment
            value = [value]
        if len(src) > 1 and not node:  # an emptied hosted table ([checkpointing])
            _parents(data, src[:-1])[0][0].pop(src[-2], None)
        _place(data, dst, value, source, taken)
        moved = True
    return moved


def _num_gpus(data: dict[str, Any]) -> None:
    """num_gpus = N: GPU 0..N-2 serve vLLM and the last trains (one GPU: both share GPU 0)."""
    if "num_gpus" not in data:
        return
    count = data.pop("num_gpus")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise TrainConfigError(f"num_gpus must be a positive integer (got {count!r})")
    if "inference_gpu_ids" in data or "trainer_gpu_ids" in data:
        raise TrainConfigError("num_gpus and inference_gpu_ids/trainer_gpu_ids both set the GPUs: keep one of them")
    data["inference_gpu_ids"] = list(range(max(count - 1, 1)))
    data["trainer_gpu_ids"] = [count - 1]


def derive_defaults(data: dict[str, Any]) -> None:
    """inference_gpu_ids = [0, 1, 2] with no parallel sizes: one vLLM replica per GPU (data parallel 3)."""
    ids = data.get("inference_gpu_ids")
    inference = data.get("inference") if isinstance(data.get("inference"), dict) else {}
    if isinstance(ids, list) and len(ids) > 1 and "tensor_parallel_size" not in inference \
            and "data_parallel_size" not in inference:
        data.setdefault("inference", {})["data_parallel_size"] = len(ids)


def normalize(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The dict in our shape, and {our path: the key the file used} for error messages."""
    out = dict(data)
    renames: dict[str, str] = {}
    if isinstance(out.get("model"), str):  # hosted: model = "Qwen/..."
        if "model_name" in out:
            raise TrainConfigError("model and model_name both set the model: keep one of them")
        out["model"] = {"name": out["model"]}
        renames["model.name"] = "model"
    for key, (allowed, message) in FIXED.items():
        if key in out:
            if out.pop(key) != allowed:
                raise TrainConfigError(message)
    _num_gpus(out)
    taken: dict[str, str] = {}
    for source, target in ALIASES:
        if _move(out, source, target, taken):
            renames[target.replace("[]", "")] = source.replace("[]", "")
    for path, message in HOSTED_ONLY.items():
        parts = _split(path)
        if any(key in node for node, key in _parents(out, parts)):
            raise TrainConfigError(message)
    return out, renames


def translate_override_key(key: str) -> str:
    """`--set batch_size=16` means orchestrator.batch_size; `--set env[0].weight=2` orchestrator.env[0].ratio."""
    for source, target in ALIASES:
        pattern = re.escape(source).replace(r"\[\]", r"(\[\d+\])")
        match = re.match(rf"^{pattern}(?=$|[.\[])", key)
        if match:
            replacement = target
            for index in match.groups():
                replacement = replacement.replace("[]", index, 1)
            key = replacement + key[match.end():]
    if key == "model":
        return "model.name"
    return key


def alias_names() -> list[str]:
    """The top-level keys the table accepts (for `did you mean` hints)."""
    return sorted({s.split(".")[0].split("[")[0] for s, _ in ALIASES} | set(FIXED) | {"num_gpus", "model"})
