"""[wandb.log_extras], the orchestrator's half: on the steps it logs, rollouts/step_N/extras.json holds a few of
the step's rollouts as table rows and the rewards and advantages of the batch. The orchestrator has the texts;
the trainer, which holds the W&B run, logs the file when it logs the step (trainer/wandb_extras.py), so the
table costs the trainer no tokenizer and the orchestrator no W&B run.

Rows are drawn with a generator seeded by the run's seed and the step, so a rerun (or a resume) logs the same
rollouts. A step with errored rollouts gives a quarter of its rows (at least one) to them, with their error
text: a uniform draw would rarely show the failures one opens the table to find. RL rows are the rollouts
sampled for the step (groups reused from the surplus buffer were shown at their own step); an advantage is
shown where the rollout trains (its group is in the batch and it has tokens). SFT rows are samples of the
batch, decoded: the prompt is what precedes the first trained token; reward and advantage stay empty
(a teacher's rollout shows its reward).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prime_cli.envs.messages import messages_of
from prime_cli.train.plugin_api import (
    RLConfig,
    TrainingRunLayout,
    TrainingSample,
    write_json_atomic,
)

COLUMNS = ["step", "env", "example_id", "prompt", "completion", "reward", "advantage", "error"]
ERRORED_SHARE = 4  # errored rollouts get rows // ERRORED_SHARE of the rows (at least one) when there are some


@dataclass
class RolloutRecord:
    """What the table may show of one sampled rollout (its texts are the state's, not copies)."""

    prompt: Any
    completion: Any
    reward: float | None  # None: errored and left out of its group
    slot: int | None  # its index in the group's rewards (and samples), when it counts there
    error: str | None


def extras_config(config: RLConfig) -> Any | None:
    """[wandb.log_extras], or None when off."""
    return config.wandb.log_extras if config.wandb is not None else None


def due(config: RLConfig, step: int) -> bool:
    extras = extras_config(config)
    return extras is not None and extras.due(step)


def cut(text: str, max_chars: int) -> str:
    """`text` within max_chars: its head and tail around a marker that says how much was cut."""
    if len(text) <= max_chars:
        return text
    marker = ""
    for _ in range(2):  # the marker's length depends on the count it names
        keep = max(max_chars - len(marker), 0)
        marker = f"\n[... {len(text) - keep} characters cut ...]\n"
    keep = max(max_chars - len(marker), 0)
    head = keep - keep // 2
    return text[:head] + marker + text[len(text) - keep // 2:]


def transcript(value: Any) -> str:
    """A prompt or completion as text: a plain string as it is, messages as `role: text` paragraphs (tool
    calls as name(arguments))."""
    if isinstance(value, str):
        return value
    parts = []
    for message in messages_of(value):
        text = message.get("content")
        if isinstance(text, list):
            text = "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in text)
        calls = [f"{(c.get('function') or {}).get('name', '?')}({(c.get('function') or {}).get('arguments', '')})"
                 for c in message.get("tool_calls") or [] if isinstance(c, dict)]
        body = "\n".join(x for x in [str(text or ""), *calls] if x)
        parts.append(f"{message.get('role', '?')}: {body}")
    return "\n\n".join(parts)


def pick(rows: int, errored: list[int], others: list[int], rng: random.Random) -> list[int]:
    """`rows` indexes: a share for the errored ones (see the module's note), the rest uniform; in order."""
    if rows <= 0:
        return []
    from_errored = min(len(errored), max(1, rows // ERRORED_SHARE)) if errored else 0
    chosen = rng.sample(errored, from_errored)
    rest = [i for i in errored if i not in chosen] if len(others) < rows - from_errored else []
    pool = others + rest
    chosen += rng.sample(pool, min(rows - from_errored, len(pool)))
    return sorted(chosen)


def rl_extras(step: int, groups: list[Any], kept: list[Any], config: RLConfig) -> dict[str, Any]:
    """The extras of an RL step: rows from `groups` (sampled for the step; their rollout_log), distributions
    of `kept` (the batch's groups)."""
    extras = extras_config(config)
    trained = {id(g) for g in kept}
    rollouts = [(group, record) for group in groups for record in group.rollout_log]
    errored = [i for i, (_, record) in enumerate(rollouts) if record.error is not None]
    others = [i for i, (_, record) in enumerate(rollouts) if record.error is None]
    rng = random.Random(f"wandb-extras/{config.orchestrator_seed}/{step}")
    rows = []
    for index in pick(extras.rows(len(rollouts)), errored, others, rng):
        group, record = rollouts[index]
        advantage = None
        if id(group) in trained and record.slot is not None and record.slot < len(group.rewards) \
                and group.samples[record.slot]:
            advantage = group.rewards[record.slot] - group.mean
        rows.append(row(step, group.env, group.example_id, transcript(record.prompt),
                        transcript(record.completion), record.reward, advantage, record.error, extras.max_chars))
    out: dict[str, Any] = {"step": step, "columns": COLUMNS, "rows": rows}
    if extras.distributions:
        out["distributions"] = {
            "reward": [r for g in kept for r in g.rewards],
            "advantage": [r - g.mean for g in kept for r, s in zip(g.rewards, g.samples, strict=True) if s]}
    return out


def sft_extras(step: int, samples: list[TrainingSample], tokenizer: Any, config: RLConfig) -> dict[str, Any]:
    """The extras of an SFT step: a few of the batch's samples, decoded (the batch is drawn already; decoding
    a few rows here costs the trainer nothing)."""
    extras = extras_config(config)
    rng = random.Random(f"wandb-extras/{config.orchestrator_seed}/{step}")
    scored = config.orchestrator.teacher_rollout_model is not None  # a data set's rows hold a placeholder 0.0
    rows = []
    for index in pick(extras.rows(len(samples)), [], list(range(len(samples))), rng):
        sample = samples[index]
        mask = sample["loss_mask"]
        start = mask.index(1) if 1 in mask else len(mask)
        ids = sample["input_ids"]
        rows.append(row(step, sample.get("env", ""), sample.get("example_id"), tokenizer.decode(ids[:start]),
                        tokenizer.decode(ids[start:]), sample.get("reward") if scored else None, None, None,
                        extras.max_chars))
    return {"step": step, "columns": COLUMNS, "rows": rows}


def row(step: int, env: str, example_id: Any, prompt: str, completion: str, reward: float | None,
        advantage: float | None, error: str | None, max_chars: int) -> list[Any]:
    """One table row in COLUMNS order; example ids as text (W&B types a column by its values, and ids are
    ints in one data set, strings in another)."""
    return [step, str(env), "" if example_id is None else str(example_id), cut(prompt, max_chars),
            cut(completion, max_chars), reward, advantage, None if error is None else cut(error, max_chars)]


def write_extras(output_dir: Path, step: int, extras: dict[str, Any]) -> None:
    """rollouts/step_N/extras.json, written before the step's batch.jsonl (which tells the trainer the step is there)."""
    path = TrainingRunLayout(output_dir).batch_extras_path(step)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, extras)
