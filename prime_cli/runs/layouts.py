"""The file layout of the runs that are not eval runs: a GEPA search's folder and a training run's
output directory. Each layout object owns every file and folder name of its kind of run, so no writer
or reader spells one out. They live here, below the engines, because more than one layer names these
files: the GEPA engine writes them, the eval reader lists GEPA runs beside eval runs, the folder checks
of `-o` recognise them, and the trainer plugin (through `prime_cli.train.plugin_api`) writes a
training run that `prime train --dry-run` describes. The eval run's layout is
`prime_cli.records.eval_run.EvalRunLayout`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .metadata import METADATA_FILE


@dataclass(frozen=True)
class GepaRunLayout:
    """Every file name of a GEPA run folder, `<root>/outputs/gepa/<env_id>--<model>/<run_id>/`."""

    run_dir: Path

    METADATA = METADATA_FILE
    CANDIDATES = "candidates.jsonl"
    ITERATIONS = "iterations.jsonl"
    FRONTIER = "pareto_frontier.jsonl"
    BEST_PROMPT = "best_prompt.txt"
    SYSTEM_PROMPT = "system_prompt.txt"  # the same text as best_prompt.txt, under verifiers' name
    STATE = "state.json"  # what a resume needs (JSON, not pickle)
    ROLLOUTS = "rollouts.jsonl"  # the rollout cache
    LOG = "gepa.log"
    RUNS_FOLDER = "gepa"  # <root>/outputs/gepa/

    def __truediv__(self, name: str) -> Path:
        return self.run_dir / name

    @property
    def metadata_path(self) -> Path:
        return self.run_dir / self.METADATA

    @property
    def candidates_path(self) -> Path:
        return self.run_dir / self.CANDIDATES

    @property
    def iterations_path(self) -> Path:
        return self.run_dir / self.ITERATIONS

    @property
    def frontier_path(self) -> Path:
        return self.run_dir / self.FRONTIER

    @property
    def best_prompt_path(self) -> Path:
        return self.run_dir / self.BEST_PROMPT

    @property
    def state_path(self) -> Path:
        return self.run_dir / self.STATE

    @property
    def rollouts_path(self) -> Path:
        return self.run_dir / self.ROLLOUTS

    @property
    def log_path(self) -> Path:
        return self.run_dir / self.LOG

    def looks_like_run(self) -> bool:
        """metadata.json and either candidates.jsonl or a place under outputs/gepa/."""
        return self.metadata_path.is_file() and (
            self.candidates_path.is_file() or self.run_dir.parent.parent.name == self.RUNS_FOLDER)

    @classmethod
    def runs_folder(cls, env_id: str, model: str, cwd: Path | None = None) -> Path:
        """The folder a run of `env_id` with `model` is created in: `<root>/outputs/gepa/<env>--<model>`."""
        from prime_cli.envs.loader import module_name  # lazy: already loaded

        base = cwd or Path(".")
        env_folder = base / "environments" / module_name(env_id)
        root = env_folder if env_folder.is_dir() else base
        return root / "outputs" / cls.RUNS_FOLDER / f"{env_id.replace('/', '--')}--{model.replace('/', '--')}"


STEP_DIR = re.compile(r"^step_(\d+)$")


def step_dir_name(step: int) -> str:
    return f"step_{step}"


def steps_in(folder: Path) -> list[int]:
    """The N of every `step_N` folder in `folder`, ascending (none when it does not exist)."""
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for p in folder.iterdir() if (m := STEP_DIR.match(p.name)))


@dataclass(frozen=True)
class TrainingRunLayout:
    """Every file and folder of a `prime train` output directory.

    config.json (the resolved config), metrics.jsonl (one line per step), logs/ (one log per part),
    weights/step_N/ (the PEFT adapter after step N; step_0 is the untrained one),
    checkpoints/step_N/{trainer/, orchestrator.json} (what --resume-step N needs; the trainer builds it
    in a hidden folder and renames it into place whole, so a checkpoints/step_N that exists is complete),
    rollouts/step_N/{batch.jsonl, stats.json, orchestrator.json} (the batch step N trained on, and the
    orchestrator's progress after it, which the trainer copies into the checkpoint of step N; the other
    two are written first and batch.jsonl renamed into place last, so a batch.jsonl that exists is complete;
    with [wandb.log_extras], on the steps it logs, extras.json too, written before batch.jsonl: a few of the
    step's rollouts and its rewards and advantages, which the trainer logs to W&B),
    online_evals/step_N/<env>/ (an ordinary eval run of the adapter of step N, [orchestrator.eval]; not
    `evals/`, so that a run whose output_dir is `outputs` never shares a folder with `prime eval run -s`) and
    evals.jsonl (one line per online eval: its step and per-environment means).
    prime-train.json (the manifest, written first: marks the folder as a prime training run's) and
    train.lock (held with an OS lock while a run uses the folder); config.pending.json (a resume's new
    config, renamed over config.json once the resumed run has trained a step); wandb/ (W&B offline files);
    parts.json and heartbeats/<part>.json (parts started apart with --part: the trainer part's marker, and
    each part's heartbeat, by which the others notice it is gone).
    """

    output_dir: Path

    CONFIG = "config.json"
    METRICS = "metrics.jsonl"
    LOGS = "logs"
    WEIGHTS = "weights"
    CHECKPOINTS = "checkpoints"
    ROLLOUTS = "rollouts"
    EVALS = "online_evals"
    EVALS_LOG = "evals.jsonl"
    MANIFEST = "prime-train.json"
    LOCK = "train.lock"
    PENDING_CONFIG = "config.pending.json"
    WANDB = "wandb"
    PARTS_MARKER = "parts.json"
    HEARTBEATS = "heartbeats"
    STEP_FOLDERS = (ROLLOUTS, WEIGHTS, CHECKPOINTS, EVALS)  # the folders that hold one step_N each
    # every entry a run writes in its output directory: all that a fresh start may ever delete
    OWNED = (MANIFEST, LOCK, CONFIG, PENDING_CONFIG, METRICS, EVALS_LOG, LOGS, *STEP_FOLDERS, WANDB, PARTS_MARKER,
             HEARTBEATS)
    TRAINER_CHECKPOINT = "trainer"
    ORCHESTRATOR_CHECKPOINT = "orchestrator.json"
    BATCH = "batch.jsonl"
    BATCH_STATS = "stats.json"
    BATCH_EXTRAS = "extras.json"
    PART_LOGS = ("inference.log", "orchestrator.log", "trainer.log")

    @property
    def config_path(self) -> Path:
        return self.output_dir / self.CONFIG

    @property
    def metrics_path(self) -> Path:
        return self.output_dir / self.METRICS

    @property
    def manifest_path(self) -> Path:
        return self.output_dir / self.MANIFEST

    @property
    def lock_path(self) -> Path:
        return self.output_dir / self.LOCK

    @property
    def pending_config_path(self) -> Path:
        return self.output_dir / self.PENDING_CONFIG

    def owned_entries(self) -> list[Path]:
        """The entries of OWNED that exist in the output directory."""
        return [self.output_dir / name for name in self.OWNED if (self.output_dir / name).exists()]

    @property
    def logs_dir(self) -> Path:
        return self.output_dir / self.LOGS

    def log_path(self, part: str) -> Path:
        """logs/<part>.log for part inference, orchestrator or trainer."""
        return self.logs_dir / f"{part}.log"

    def step_dir(self, folder: str, step: int) -> Path:
        """<folder>/step_N for folder weights, checkpoints or rollouts."""
        return self.output_dir / folder / step_dir_name(step)

    def weights_dir(self, step: int) -> Path:
        return self.step_dir(self.WEIGHTS, step)

    def checkpoint_dir(self, step: int) -> Path:
        return self.step_dir(self.CHECKPOINTS, step)

    def trainer_checkpoint(self, step: int) -> Path:
        return self.checkpoint_dir(step) / self.TRAINER_CHECKPOINT

    def orchestrator_checkpoint(self, step: int) -> Path:
        return self.checkpoint_dir(step) / self.ORCHESTRATOR_CHECKPOINT

    def orchestrator_progress(self, step: int) -> Path:
        """rollouts/step_N/orchestrator.json: what becomes checkpoints/step_N/orchestrator.json when step N is saved."""
        return self.rollouts_dir(step) / self.ORCHESTRATOR_CHECKPOINT

    def rollouts_dir(self, step: int) -> Path:
        return self.step_dir(self.ROLLOUTS, step)

    def batch_path(self, step: int) -> Path:
        return self.rollouts_dir(step) / self.BATCH

    def batch_stats_path(self, step: int) -> Path:
        return self.rollouts_dir(step) / self.BATCH_STATS

    def batch_extras_path(self, step: int) -> Path:
        return self.rollouts_dir(step) / self.BATCH_EXTRAS

    @property
    def parts_marker_path(self) -> Path:
        return self.output_dir / self.PARTS_MARKER

    def heartbeat_path(self, part: str) -> Path:
        """heartbeats/<part>.json: trainer (node 0), trainer_node<N>, orchestrator."""
        return self.output_dir / self.HEARTBEATS / f"{part}.json"

    @property
    def evals_path(self) -> Path:
        return self.output_dir / self.EVALS_LOG

    def eval_run_dir(self, step: int, env_name: str) -> Path:
        """online_evals/step_N/<env>: the eval run (metadata.json, results.jsonl) of step N's adapter on one environment."""
        return self.step_dir(self.EVALS, step) / env_name.replace("/", "--")

    def steps(self, folder: str) -> list[int]:
        """The steps with a step_N folder under weights, checkpoints or rollouts."""
        return steps_in(self.output_dir / folder)

    def weight_steps(self) -> list[int]:
        return self.steps(self.WEIGHTS)

    def checkpoint_steps(self) -> list[int]:
        """Steps a run can resume from: a trainer checkpoint and the orchestrator's progress."""
        return [s for s in self.steps(self.CHECKPOINTS)
                if self.trainer_checkpoint(s).is_dir() and self.orchestrator_checkpoint(s).is_file()]
