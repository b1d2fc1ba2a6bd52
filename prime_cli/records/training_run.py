"""Read a `prime train` output folder for browsing (the TUI's training screens): its header (from the
manifest prime-train.json), the per-step numbers
of metrics.jsonl merged with rollouts/step_N/stats.json (a step sampled but not trained yet still
shows), the online evals of evals.jsonl, and one step's samples from batch.jsonl. Read only; the names come from TrainingRunLayout.
JSON-lines files follow records.json_lines: a torn last line (a run still writing) is left out, any other bad line is an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from prime_cli.runs.json_lines import read_json_object
from prime_cli.runs.layouts import TrainingRunLayout
from prime_cli.runs.status import RunStatus

from .header import Header, read_header
from .json_lines import read_json_lines
from .online_evals import eval_env_names, eval_mean, read_evals
from .training_folder import lock_holder, read_manifest


def is_training_run(path: Path) -> bool:
    """config.json plus metrics.jsonl or a rollouts/ folder: what `prime train` leaves behind."""
    layout = TrainingRunLayout(Path(path))
    return layout.config_path.is_file() and (
        layout.metrics_path.is_file() or (layout.output_dir / layout.ROLLOUTS).is_dir())


@dataclass
class TrainingRun:
    path: Path
    config: dict[str, Any]
    steps: list[dict[str, Any]]  # one per step, ascending: stats.json merged under metrics.jsonl
    trained_steps: int  # steps with a metrics.jsonl line
    mtime: float = 0.0
    evals: list[dict[str, Any]] = field(default_factory=list)  # evals.jsonl ([orchestrator.eval]), as written
    manifest: dict[str, Any] = field(default_factory=dict)  # prime-train.json ({} when none or not prime's)

    @property
    def header(self) -> Header:
        """The manifest's header; for a manifest of format version 0 (or none), one derived from it."""
        return read_header(self.manifest, lambda: "training", self.path.name)

    @property
    def model(self) -> str:
        return str((self.config.get("model") or {}).get("name") or "?")

    @property
    def env_ids(self) -> list[str]:
        envs = (self.config.get("orchestrator") or {}).get("env") or []
        return [str(e.get("id")) for e in envs if isinstance(e, dict)]

    @property
    def max_steps(self) -> int | None:
        value = self.config.get("max_steps")
        return value if isinstance(value, int) else None

    @property
    def status(self) -> RunStatus | str:
        """The folder's lock is the authority on a live run: running while a process holds it (completed once
        every step trained). Else the status the launcher recorded when the run ended (failed, stopped,
        completed), and where it recorded none (a run of an older version, or one killed with SIGKILL whose
        header still says running): completed when every step trained, else stopped. A run written before
        the lock existed: running if something was written in the last minute."""
        import time  # lazy: already loaded

        done = self.max_steps is not None and self.trained_steps >= self.max_steps
        layout = TrainingRunLayout(self.path)
        if layout.lock_path.exists() and lock_holder(layout) is not None:
            return RunStatus.COMPLETED if done else RunStatus.RUNNING
        header = self.header
        if header["format_version"] >= 1 and header["status"] != RunStatus.RUNNING:
            return RunStatus.read(header["status"])
        if done:
            return RunStatus.COMPLETED
        if layout.lock_path.exists():
            return RunStatus.STOPPED
        return RunStatus.RUNNING if time.time() - self.mtime < 60 else RunStatus.STOPPED

    @property
    def is_sft(self) -> bool:
        """An SFT run (trainer.loss.type "sft": a data set or a teacher's rollouts): its curve is the loss."""
        return ((self.config.get("trainer") or {}).get("loss") or {}).get("type") == "sft"

    @property
    def data_sources(self) -> list[str]:
        """An SFT run's data sets (their file or folder names)."""
        dataset = (((self.config.get("orchestrator") or {}).get("algo") or {}).get("dataset") or {})
        return [Path(str(s.get("dataset"))).name for s in dataset.get("source") or [] if isinstance(s, dict)]

    def curve(self) -> tuple[str, list[tuple[int, float]]]:
        """(what the run's curve shows, its points): the loss per step for SFT, else the mean reward."""
        if self.is_sft:
            return "SFT loss per step", [(s["step"], float(s["loss"])) for s in self.steps
                                         if isinstance(s.get("loss"), (int, float))]
        return "reward mean per step", self.rewards()

    def rewards(self) -> list[tuple[int, float]]:
        return [(s["step"], float(s["reward_mean"])) for s in self.steps
                if isinstance(s.get("reward_mean"), (int, float))]

    def eval_curves(self) -> dict[str, list[tuple[int, float]]]:
        """{environment: [(step evaluated, mean reward)]} from evals.jsonl, ascending by step."""
        curves: dict[str, list[tuple[int, float]]] = {}
        for line in sorted(self.evals, key=lambda e: e["step"]):
            for env in eval_env_names(line):
                mean = eval_mean(line, env)
                if mean is not None:
                    curves.setdefault(env, []).append((line["step"], mean))
        return curves

    @property
    def has_errors(self) -> bool:
        """Some step had errored rollouts (error_rate > 0: counted, and not trained on)."""
        return any(step_error_rate(s) for s in self.steps)

    @property
    def last_reward(self) -> float | None:
        rewards = [r for _, r in self.rewards()]
        return rewards[-1] if rewards else None


def step_error_rate(step: dict[str, Any]) -> float:
    """The fraction of a step's sampled rollouts that errored (0.0 when not recorded)."""
    rate = step.get("error_rate")
    return float(rate) if isinstance(rate, (int, float)) and not isinstance(rate, bool) else 0.0


def rate_percent(rate: float) -> str:
    """`38%`, or `0.4%` below 1% (a few errors in a large step still show)."""
    return f"{rate:.0%}" if rate >= 0.01 or rate == 0 else f"{rate:.1%}"


def step_error_kinds(step: dict[str, Any]) -> str:
    """`reward:correct_answer 10, ModelError 2` from a step's error_rate/<kind> keys (most first; as
    percentages where the step does not record how many rollouts were sampled)."""
    sampled = step.get("rollouts_sampled")
    kinds = sorted(((key.split("/", 1)[1], float(value)) for key, value in step.items()
                    if key.startswith("error_rate/") and isinstance(value, (int, float)) and value > 0),
                   key=lambda kind: -kind[1])
    if isinstance(sampled, int) and sampled > 0:
        return ", ".join(f"{kind} {round(rate * sampled)}" for kind, rate in kinds)
    return ", ".join(f"{kind} {rate_percent(rate)}" for kind, rate in kinds)


def read_training_run(path: Path) -> TrainingRun:
    layout = TrainingRunLayout(Path(path))
    by_step: dict[int, dict[str, Any]] = {}
    for step in layout.steps(layout.ROLLOUTS):
        stats = read_json_object(layout.batch_stats_path(step))
        if stats:
            by_step[step] = {**stats, "step": step}
    metrics = [m for m in read_json_lines(layout.metrics_path) if isinstance(m.get("step"), int)]
    for row in metrics:
        by_step[row["step"]] = {**by_step.get(row["step"], {}), **row}
    stamps = [p.stat().st_mtime for p in (layout.metrics_path, layout.config_path) if p.exists()]
    stamps += [layout.rollouts_dir(s).stat().st_mtime for s in by_step if layout.rollouts_dir(s).exists()]
    return TrainingRun(Path(path), read_json_object(layout.config_path), [by_step[s] for s in sorted(by_step)],
                       len({m["step"] for m in metrics}), max(stamps, default=0.0), read_evals(layout.evals_path),
                       read_manifest(layout) or {})


def watch_key(path: Path) -> tuple[int, int, int, int]:
    """Changes when a step is sampled or trained, an online eval ends, or the launcher records how the run
    ended in its manifest (for following a running run)."""
    layout = TrainingRunLayout(Path(path))
    size = layout.metrics_path.stat().st_size if layout.metrics_path.exists() else 0
    evals = layout.evals_path.stat().st_size if layout.evals_path.exists() else 0
    manifest = layout.manifest_path.stat().st_mtime_ns if layout.manifest_path.exists() else 0
    return size, len(layout.steps(layout.ROLLOUTS)), evals, manifest


@dataclass
class StepSample:
    """One line of rollouts/step_N/batch.jsonl, summarised; `segments` splits its tokens into runs of
    (kind, token ids): prompt (before the first trained token), trained (loss_mask 1) and masked
    (loss_mask 0 after the prompt: environment or tool tokens the loss skips)."""

    index: int
    env: str
    example_id: Any
    reward: float | None
    advantage: float | None
    policy_step: int | None
    truncated: bool
    segments: list[tuple[str, list[int]]] = field(default_factory=list)

    def count(self, kind: str) -> int:
        return sum(len(ids) for k, ids in self.segments if k == kind)

    @property
    def num_tokens(self) -> int:
        return sum(len(ids) for _, ids in self.segments)


def _segments(input_ids: list[int], loss_mask: list[int]) -> list[tuple[str, list[int]]]:
    segments: list[tuple[str, list[int]]] = []
    started = False
    for token, mask in zip(input_ids, loss_mask, strict=False):  # a malformed line: the shorter wins
        started = started or bool(mask)
        kind = "trained" if mask else "masked" if started else "prompt"
        if segments and segments[-1][0] == kind:
            segments[-1][1].append(token)
        else:
            segments.append((kind, [token]))
    return segments


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def read_step_samples(path: Path, step: int) -> list[StepSample]:
    """The samples step N trained on (none when batch.jsonl is not written yet)."""
    samples = []
    for i, row in enumerate(read_json_lines(TrainingRunLayout(Path(path)).batch_path(step))):
        ids, mask = row.get("input_ids") or [], row.get("loss_mask") or []
        policy_step = row.get("policy_step")
        samples.append(StepSample(i, str(row.get("env") or ""), row.get("example_id"), _number(row.get("reward")),
                                  _number(row.get("advantage")), policy_step if isinstance(policy_step, int) else None,
                                  bool(row.get("truncated")), _segments(list(ids), list(mask))))
    return samples


def tokenizer_folder(path: Path) -> Path | None:
    """A local folder with tokenizer.json for the run's model: the base model a saved adapter names
    (the embedded model's folder for `model.name = "local"`), else model.name when it is a folder."""
    layout = TrainingRunLayout(Path(path))
    candidates = []
    for step in reversed(layout.weight_steps()):
        base = read_json_object(layout.weights_dir(step) / "adapter_config.json").get("base_model_name_or_path")
        if isinstance(base, str):  # relative to where `prime train` ran: try the run's ancestors too
            candidates += [Path(base)] if Path(base).is_absolute() else [
                Path(base), *(parent / base for parent in Path(path).resolve().parents)]
            break
    name = (read_json_object(layout.config_path).get("model") or {}).get("name")
    if isinstance(name, str):
        candidates.append(Path(name).expanduser())
    return next((c for c in candidates if (c / "tokenizer.json").is_file()), None)


@lru_cache(maxsize=4)
def _load_tokenizer(folder: str):  # noqa: ANN202 (tokenizers.Tokenizer, imported lazily)
    from tokenizers import Tokenizer  # lazy: optional dependency

    return Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))


def decoder_for(path: Path):  # noqa: ANN201
    """A function token ids -> text when the run's tokenizer is on disk (loaded once, fast:
    `tokenizers`, not transformers), else None (the screens show token counts)."""
    folder = tokenizer_folder(path)
    if folder is None:
        return None
    try:
        tokenizer = _load_tokenizer(str(folder))
    except Exception:  # noqa: BLE001 - a damaged or foreign tokenizer file: fall back to counts
        return None
    return lambda ids: tokenizer.decode(ids, skip_special_tokens=False)


def find_training_runs(top: Path, max_depth: int = 4) -> list[Path]:
    """Training run folders under `top` (itself included), not descending into them."""
    top = Path(top)
    if is_training_run(top):
        return [top]
    if max_depth <= 0 or not top.is_dir():
        return []
    found: list[Path] = []
    try:
        children = sorted(p for p in top.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return found
    for child in children:
        if child.name in TrainingRunLayout.STEP_FOLDERS or child.name in {"__pycache__", "node_modules"}:
            continue
        found.extend(find_training_runs(child, max_depth - 1))
    return found
