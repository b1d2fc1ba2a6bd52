"""The launcher's live view: one line per trained step, read from metrics.jsonl as it grows; the parts' logs
read for the user; the closing lines."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from prime_cli.train.plugin_api import (
    TrainingRunLayout,
    env_args_flag,
    model_folder,
    parse_whole_line,
    trained_env_args,
)

from .orchestrator.rollout_errors import FATAL_PREFIX

# the prefix of the trainer's W&B lines (fallback to offline, the sync command), relayed to the terminal
WANDB_NOTICE = "W&B: "
SERVER_NOTICE = "inference server "  # the orchestrator dropped a server of orchestrator.client.base_url
DATA_NOTICE = "data: "  # an SFT run's sources: rows read, rows skipped by reason, steps per epoch


def read_complete_lines(path: Path, offset: int) -> bytes:
    """The bytes of `path` from `offset` up to its last newline (a line still being written is left for
    the next read); empty while the file does not exist."""
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            chunk = handle.read()
    except FileNotFoundError:
        return b""
    return chunk[: chunk.rfind(b"\n") + 1]


class MetricsTail:
    """Yields the complete new lines of metrics.jsonl since the last call (a bad one: a JsonLinesError
    naming file:line)."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.lines_read = 0
        self.rows: list[dict[str, Any]] = []

    def poll(self) -> list[dict[str, Any]]:
        complete = read_complete_lines(self.path, self.offset)
        self.offset += len(complete)
        new = []
        for line in complete.split(b"\n")[:-1]:
            self.lines_read += 1
            if line.strip():
                new.append(parse_whole_line(self.path, self.lines_read, line))
        self.rows += new
        return new


class NoticeTail:
    """The trainer's lines meant for the user (starting with `prefix`), each with the last step the
    trainer had logged before it (its `step N: ...` line follows that step's metrics row; 0: none yet),
    so the launcher can print them in order among the step lines. Read from the log's size at creation:
    a resumed run's old lines are not shown again."""

    STEP_LINE = re.compile(rb"^step (\d+): ")

    def __init__(self, path: Path, prefix: str | tuple[str, ...]):
        self.path = path
        self.prefix = tuple(p.encode() for p in ((prefix,) if isinstance(prefix, str) else prefix))
        self.offset = path.stat().st_size if path.exists() else 0
        self.last_step = 0

    def poll(self) -> list[tuple[int, str]]:
        complete = read_complete_lines(self.path, self.offset)
        self.offset += len(complete)
        found = []
        for line in complete.splitlines():
            if step := self.STEP_LINE.match(line):
                self.last_step = int(step.group(1))
            elif line.startswith(self.prefix):
                found.append((self.last_step, line.decode(errors="replace")))
        return found


def _num(row: dict[str, Any], key: str, fmt: str, default: str = "-") -> str:
    value = row.get(key)
    return format(value, fmt) if isinstance(value, (int, float)) else default


def error_kinds(row: dict[str, Any]) -> list[tuple[str, float]]:
    """(kind, errored rollouts) of a metrics row's error_rate/<kind> keys, most first; the count is a
    fraction of the sampled rollouts where the row does not say how many were sampled (older runs)."""
    sampled = row.get("rollouts_sampled")
    kinds = [(key.split("/", 1)[1], value * sampled if isinstance(sampled, int) and sampled else value)
             for key, value in row.items() if key.startswith("error_rate/") and isinstance(value, (int, float))]
    return sorted((k for k in kinds if k[1] > 0), key=lambda kind: -kind[1])


def errors_part(row: dict[str, Any]) -> str | None:
    """`errors 40% (reward:correct_answer 12, ModelError 1)` when any sampled rollout errored."""
    rate = row.get("error_rate")
    if not isinstance(rate, (int, float)) or rate <= 0:
        return None
    counted = isinstance(row.get("rollouts_sampled"), int) and row.get("rollouts_sampled")
    kinds = ", ".join(f"{kind} {count:.0f}" if counted else f"{kind} {count:.0%}" for kind, count in error_kinds(row))
    return f"errors {rate:{'.0%' if rate >= 0.01 else '.1%'}}" + (f" ({kinds})" if kinds else "")


def is_sft_row(row: dict[str, Any]) -> bool:
    """A step of SFT: on a data set (its batch stats count rows), or on a teacher's rollouts (an SFT loss, none
    of the RL loss's importance-ratio metrics)."""
    return "sft_rows" in row or ("loss" in row and "mismatch_kl" not in row)


def sft_step_line(row: dict[str, Any], max_steps: int) -> str:
    """`step 3/30  loss 1.234  batch 8 (412 loss tokens)  epoch 1.25  grad 0.412  2.1 s (train 1.9)  850 tok/s`."""
    parts = [f"step {row.get('step')}/{max_steps}", f"loss {_num(row, 'loss', '.4f')}"]
    if "reward_mean" in row:  # a teacher's rollouts: the reward of what it wrote
        parts.append(f"teacher reward {_num(row, 'reward_mean', '.3f')}")
    parts += [f"batch {row.get('samples', row.get('effective_batch_size', '-'))}"
              + (f" ({row['loss_tokens']} loss tokens)" if "loss_tokens" in row else "")]
    if "epoch" in row:
        parts.append(f"epoch {_num(row, 'epoch', '.2f')}")
    if "teacher_kept" in row:  # a teacher's rollouts: how many passed min_reward
        parts.append(f"kept {row['teacher_kept']}, filtered {row.get('teacher_filtered', 0)}")
    errors = errors_part(row)
    if errors:
        parts.append(errors)
    parts += [f"grad {_num(row, 'grad_norm', '.3f')}",
             f"{_num(row, 'step_s', '.1f')} s (train {_num(row, 'train_s', '.1f')})",
             f"{_num(row, 'tokens_per_s', '.0f')} tok/s"]
    if row.get("skipped"):
        parts.append("SKIPPED (non-finite loss or gradient)")
    return "  ".join(parts)


def step_line(row: dict[str, Any], max_steps: int, orchestrator_log: str = "logs/orchestrator.log") -> str:
    """`step 3/30  reward 0.214 ± 0.081  batch 32 ...` for one metrics row (an SFT step: sft_step_line)."""
    if is_sft_row(row):
        return sft_step_line(row, max_steps)
    parts = [f"step {row.get('step')}/{max_steps}",
             f"reward {_num(row, 'reward_mean', '.3f')} ± {_num(row, 'reward_std', '.3f')}"]
    per_env = row.get("per_env") or {}
    if len(per_env) > 1:
        parts.append(" ".join(f"{env} {_num(v, 'reward_mean', '.3f')}" for env, v in per_env.items()))
    parts.append(f"batch {row.get('effective_batch_size', '-')}")
    errors = errors_part(row)
    if errors:
        parts.append(errors)
    metric_rate = row.get("metric_error_rate")
    if isinstance(metric_rate, (int, float)) and metric_rate > 0:
        parts.append(f"metric errors {metric_rate:.0%} (not in the reward)")
    if "teacher_kl" in row:  # on-policy distillation: mean student - teacher log-prob of the sampled tokens
        parts.append(f"teacher kl {_num(row, 'teacher_kl', '.4f')}")
    parts.append(f"kl {_num(row, 'mismatch_kl', '.2e')}")
    parts.append(f"masked {_num(row, 'masked_fraction', '.1%')}")
    parts.append(f"grad {_num(row, 'grad_norm', '.3f')}")
    timing = f"{_num(row, 'step_s', '.1f')} s (gen {_num(row, 'generation_s', '.1f')}, train {_num(row, 'train_s', '.1f')})"
    parts.append(timing)
    parts.append(f"{_num(row, 'tokens_per_s', '.0f')} tok/s")
    dropped, errored = row.get("dropped_rollouts"), row.get("errored_rollouts")
    if row.get("effective_batch_size") == 0 and (dropped or errored):  # (the orchestrator now stops instead)
        parts.append(f"all rollouts failed ({f'{dropped} dropped' if dropped else f'{errored} errored'}): "
                     f"see {orchestrator_log}")
    elif row.get("skipped"):
        parts.append("SKIPPED (non-finite loss or gradient)")
    return "  ".join(parts)


def reward_curve(rows: list[dict[str, Any]], key: str = "reward_mean") -> str:
    """`0.14 0.15 0.19 ...` (the per-step reward means, or another key, for the final summary)."""
    return " ".join(_num(row, key, ".3f") for row in rows)


def fatal_line(log_path: Path) -> str | None:
    """The last `fatal: ...` line of a part's log (without the prefix), if any."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    return next((line[len(FATAL_PREFIX):] for line in reversed(lines) if line.startswith(FATAL_PREFIX)), None)


def error_line(log_path: Path) -> str | None:
    """A part's last line when it is its own `error: ...` or `fatal: ...` line (the cause it exited with)."""
    try:
        lines = log_path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return None
    last = lines[-1] if lines else ""
    return last if last.startswith(("error: ", FATAL_PREFIX)) else None


def serve_command(model: str) -> str:
    """`prime serve` for the base an adapter was trained on: alone for the embedded model, with the name for
    the other built-in one, with the folder for a local model or a hub id in the local cache."""
    if model == "local":
        return "prime serve"
    if model == "local-moe":
        return f"prime serve {model}"
    return f"prime serve {shlex.quote(str(model_folder(model) or model))}"


def summarize(console: Any, run: Any, output_dir: Path) -> int:
    """The closing lines of a run (a launcher.Run); 1 when the run trained on no sample at all (it learned nothing)."""
    rows = run.metrics.rows
    layout = TrainingRunLayout(output_dir)
    last = max(layout.weight_steps(), default=0)
    if rows and all(row.get("effective_batch_size") == 0 for row in rows):
        console.print(f"[bold red]training failed:[/] none of the {len(rows)} steps of this run had a sample to "
                      f"train on (every rollout failed or was dropped; see {run.orchestrator.log_path})")
        return 1
    sft = bool(rows) and all(is_sft_row(row) for row in rows)
    curve = f"loss per step: {reward_curve(rows, 'loss')}" if sft else f"reward per step: {reward_curve(rows)}"
    if any("teacher_kl" in row for row in rows):
        curve += f"; teacher kl per step: {reward_curve(rows, 'teacher_kl')}"
    console.print(f"[bold green]training done[/]: {len(rows)} step{'s' if len(rows) != 1 else ''} this run; {curve}")
    orch = run.config.orchestrator
    envs = orch.env or (orch.eval.env if orch.eval is not None else [])
    env_id = envs[0].id if envs else "ENV"
    adapter = layout.weights_dir(last)
    console.print(f"adapter: {adapter}  (PEFT; metrics: {layout.metrics_path})")
    model = run.config.model.name
    # the environment as the run trained it (its env args), or the eval's verdict is about another task
    args = env_args_flag(trained_env_args(run.config.model_dump(mode="json"), env_id) or {})
    console.print(f"evaluate it: {serve_command(model)} --lora trained={adapter} --port 8001   then   "
                  f"prime eval run {shlex.quote(env_id)} -m trained -b http://127.0.0.1:8001/v1{args}")
    if model in ("local", "local-moe"):  # the sweep starts the built-in model itself and reads OUT/config.json
        console.print(f"compare every checkpoint with the base: prime eval run {shlex.quote(env_id)} -m {model} "
                      f"--weights-dir {shlex.quote(str(layout.output_dir / layout.WEIGHTS))}")
    return 0
