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
    # prime-rl's SFT file (config_sft.py): [data] and [eval] at the top
    ("data.seq_len", "seq_len"),
    ("data.batch_size", "orchestrator.batch_size"),
    ("data.micro_batch_size", "trainer.micro_batch_size"),
    ("data.source", "orchestrator.algo.dataset.source"),
    ("data.shuffle", "orchestrator.algo.dataset.shuffle"),
    ("eval", "orchestrator.eval"),
    ("difficulty_threshold", "orchestrator.buffer.min_reward_variance"),
    # prime-rl's orchestrator has a W&B config of its own ([orchestrator.wandb.log_extras] in its examples):
    # one run logs here, so it is [wandb]
    ("orchestrator.wandb", "wandb"),
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


def _size(inference: dict[str, Any], key: str) -> int | None:
    """inference.<key> when the config sets it to a positive integer (anything else: the model reports it)."""
    value = inference.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def _gpu_words(ids: list[int]) -> str:
    if len(ids) > 2 and ids == list(range(ids[0], ids[-1] + 1)):
        return f"GPUs {ids[0]}-{ids[-1]}"
    return ("GPU " if len(ids) == 1 else "GPUs ") + ",".join(map(str, ids))


def _num_gpus(data: dict[str, Any], inference: dict[str, Any], tp_key: str) -> list[str]:
    """num_gpus = N, placed as prime-rl places its single-node deployment: inference takes the first GPUs,
    in vLLM replicas of tensor_parallel_size GPUs each (data_parallel_size = the number of replicas), and
    the trainer the rest. With no data_parallel_size: as many replicas as leave the trainer at least one GPU.
    One GPU: vLLM and the trainer share GPU 0."""
    count = data.pop("num_gpus")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise TrainConfigError(f"num_gpus must be a positive integer (got {count!r})")
    if "inference_gpu_ids" in data or "trainer_gpu_ids" in data:
        raise TrainConfigError("num_gpus and inference_gpu_ids/trainer_gpu_ids both set the GPUs: keep one of them")
    tp = _size(inference, "tensor_parallel_size") or 1
    dp = _size(inference, "data_parallel_size")
    sizes = f"num_gpus = {count}" + (f", {tp_key} = {tp}" if "tensor_parallel_size" in inference else "") \
        + (f", inference.data_parallel_size = {dp}" if dp is not None else "")
    if count == 1:
        if tp * (dp or 1) > 1:
            raise TrainConfigError(f"{sizes}: one GPU holds no vLLM replica of {tp * (dp or 1)} GPUs; "
                                   f"set num_gpus to at least {tp * (dp or 1) + 1}")
        data["inference_gpu_ids"], data["trainer_gpu_ids"] = [0], [0]
        return [f"note: {sizes}: vLLM and the trainer share GPU 0"]
    replicas = dp if dp is not None else (count - 1) // tp
    if replicas < 1 or replicas * tp >= count:
        need = (replicas or 1) * tp
        many = replicas or 1
        raise TrainConfigError(f"{sizes} leaves no GPU for the trainer: vLLM takes {need} GPU"
                               f"{'s' if need > 1 else ''} ({many} replica{'s' if many > 1 else ''} of {tp}) and "
                               f"the trainer at least one, so set num_gpus to at least {need + 1}")
    inference_ids, trainer_ids = list(range(replicas * tp)), list(range(replicas * tp, count))
    data["inference_gpu_ids"], data["trainer_gpu_ids"] = inference_ids, trainer_ids
    data.setdefault("inference", inference)["data_parallel_size"] = replicas
    return [f"note: {sizes} placed as prime-rl does, inference first: vLLM on {_gpu_words(inference_ids)} "
            f"({replicas} replica{'s' if replicas > 1 else ''} of {tp} GPU{'s' if tp > 1 else ''}: "
            f"data_parallel_size {replicas}), the trainer on {_gpu_words(trainer_ids)}"]


def derive_defaults(data: dict[str, Any], renames: dict[str, str] | None = None) -> list[str]:
    """The GPU layout the keys imply, as prime-rl derives it; returns notes on what was derived.

    - num_gpus = N: see `_num_gpus`;
    - inference_gpu_ids with no data_parallel_size: the GPUs are filled with replicas of tensor_parallel_size
      GPUs (default 1: one replica per GPU), so data_parallel_size = len(inference_gpu_ids) / tensor_parallel_size.
    A layout that cannot hold is refused naming the keys the file set, and our defaults as defaults.
    """
    renames = renames or {}
    if not isinstance(data.get("inference", {}), dict):
        return []  # `inference = 3`: the model reports it
    inference = data.get("inference", {})
    tp_key = renames.get("inference.tensor_parallel_size", "inference.tensor_parallel_size")
    if "num_gpus" in data:
        return _num_gpus(data, inference, tp_key)
    ids, tp, dp = data.get("inference_gpu_ids"), _size(inference, "tensor_parallel_size"), \
        _size(inference, "data_parallel_size")
    tp_words = f"{tp_key} = {tp}" if tp is not None else f"{tp_key} (default 1)"
    if not isinstance(ids, list):
        if ids is None and (tp or 1) * (dp or 1) > 1:
            dp_words = f", inference.data_parallel_size = {dp}" if dp is not None else ""
            need = (tp or 1) * (dp or 1)
            raise TrainConfigError(f"{tp_words}{dp_words} needs {need} inference GPUs, but inference_gpu_ids is not "
                                   f"set (our default: [0]): list {need} GPUs in inference_gpu_ids, or set num_gpus")
        return []
    if dp is None and "data_parallel_size" not in inference and ids:
        if len(ids) % (tp or 1):
            raise TrainConfigError(f"inference_gpu_ids lists {len(ids)} GPUs, which {tp_words} does not divide "
                                   f"(each vLLM replica takes {tp} GPUs): list a multiple of {tp} GPUs")
        if len(ids) // (tp or 1) > 1:
            data.setdefault("inference", inference)["data_parallel_size"] = len(ids) // (tp or 1)
    elif dp is not None and (tp or 1) * dp != len(ids):
        raise TrainConfigError(f"{tp_words} x inference.data_parallel_size = {dp} is {(tp or 1) * dp} GPUs, but "
                               f"inference_gpu_ids lists {len(ids)} ({ids}): list {(tp or 1) * dp} GPUs or change "
                               "the sizes")
    return []


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
    taken: dict[str, str] = {}
    for source, target in ALIASES:
        if _move(out, source, target, taken):
            renames[target.replace("[]", "")] = source.replace("[]", "")
    _sft_file(out)
    for path, message in HOSTED_ONLY.items():
        parts = _split(path)
        if any(key in node for node, key in _parents(out, parts)):
            raise TrainConfigError(message)
    return out, renames


def _sft_file(out: dict[str, Any]) -> None:
    """An SFT file's [data], moved by ALIASES: what is left of it is refused; its data makes the run dataset_sft."""
    data = out.get("data")
    if isinstance(data, dict):
        if data.get("type", "sft") != "sft":
            raise TrainConfigError(f"data.type = {data['type']!r}: only \"sft\" data is read here")
        data.pop("type", None)
        if "name" in data:  # prime-rl's one data set (SftDatasetConfig reads it as one source)
            _place(out, ["orchestrator", "algo", "dataset", "name"], data.pop("name"), "data.name", {})
        if data:
            raise TrainConfigError(f"unknown key data.{next(iter(data))}: [data] takes seq_len, batch_size, "
                                   "micro_batch_size, shuffle and [[data.source]] (dataset, split, min_reward, "
                                   "best_per_example, ratio, max_rows)")
        out.pop("data")
    orchestrator = out.get("orchestrator")
    algo = orchestrator.get("algo") if isinstance(orchestrator, dict) else None
    if isinstance(algo, dict) and "dataset" in algo:
        algo.setdefault("type", "dataset_sft")


def _top_level_names(model: type) -> dict[str, str]:
    """{key: where it lands} for the keys that hold a value (not a table) only at the top level of a file:
    the model's own top-level values, the top-level guide spellings, num_gpus, and the hosted `model = "..."`."""
    from .messages import section_keys  # lazy: start-up

    names = {name: name for name in model.model_fields if section_keys(model, (name,)) is None}
    for source, target in ALIASES:
        if "." not in source and "[" not in source and section_keys(model, tuple(_split(target))) is None:
            names.setdefault(source, target)
    return {**names, **{key: key for key in FIXED}, "num_gpus": "num_gpus", "model": "model.name"}


def _is_set(data: dict[str, Any], path: str) -> bool:
    node: Any = data
    for part in _split(path):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def hoist_top_level_keys(data: dict[str, Any], renames: dict[str, str], model: type) -> list[str]:
    """A top-level key written after a table header (`[wandb]` then `env_file = [...]`, which TOML reads as
    wandb.env_file) is moved to the top level when that table has no such key; one note per key says where
    it belongs. Tables are walked as `model` describes them (each entry of an array of tables too)."""
    from .messages import rename_paths, section_keys  # lazy: start-up
    from .overrides import format_path  # lazy: start-up

    names = _top_level_names(model)
    found: list[tuple[tuple[Any, ...], str, Any]] = []

    def visit(node: dict[str, Any], loc: tuple[Any, ...]) -> None:
        fields = section_keys(model, loc)
        if fields is None:  # not a section of ours (free-form args, an unknown table): validation speaks
            return
        for key in list(node):
            value = node[key]
            if isinstance(value, dict):
                visit(value, (*loc, key))
            elif isinstance(value, list):
                for index, item in enumerate(value):
                    if isinstance(item, dict):
                        visit(item, (*loc, key, index))
            if key not in fields and key in names and not isinstance(value, dict) \
                    and (key != "model" or isinstance(value, str)):
                found.append((loc, key, node.pop(key)))

    for key, value in data.items():
        if isinstance(value, dict):
            visit(value, (key,))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, dict):
                    visit(item, (key, index))
    notes = []
    for loc, key, value in found:
        table = rename_paths(format_path(loc), renames)
        header = f"[[{table.rsplit('[', 1)[0]}]]" if isinstance(loc[-1], int) else f"[{table}]"
        if key in data or _is_set(data, names[key]):
            raise TrainConfigError(f"{key} is set at the top level and again after the {header} header (TOML reads "
                                   f"that line as {table}.{key}): keep one of them")
        data[key] = value
        notes.append(f"note: {key} is a top-level key, but it follows the {header} header, so TOML reads it as "
                     f"{table}.{key}; it is taken as the top-level {key} (move it above the first [table] header)")
    return notes


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
