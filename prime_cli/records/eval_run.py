"""The typed record of an eval run: its rows, its metadata, its summary and its file layout.

DESIGN.md, "Eval results on disk", is the contract; this module is that contract in code. Every
writer and reader of an eval run names its files through `EvalRunLayout` and passes rows as
`Rollout` and metadata as `MetadataRecord`.

Rows are `TypedDict`s, not pydantic models: a run can hold 100,000 rows and the readers (summary,
TUI, export) touch every one. `benchmarks/row_types.py` on 100,000 reverse-text rows (2 shared
cores, two runs): `json.loads` alone 2.8-3.3 s; + a pydantic model's `model_validate` 4.2-4.7 s
(+45%); `model_validate_json` 3.4-3.5 s; + a `TypeAdapter` over this TypedDict 3.3-3.5 s. A
TypedDict costs nothing at run time, keeps every existing dict reader working, and still lets a
type checker see every key. Metadata is one small object per run: it gets a pydantic model
(`RunMetadata`) that validates it and fills what older files lack, while the JSON object itself
(`MetadataRecord`) is what the store reads and rewrites, so unknown keys survive a rewrite.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict  # pydantic validates these (typing.TypedDict needs 3.12)

from prime_cli.runs.metadata import METADATA_FILE
from prime_cli.runs.status import RunStatus

PathLike = str | os.PathLike

# what an eval run may record (a training run's STOPPED is never saved); older files' strings validate
EvalRunStatus = Literal[RunStatus.RUNNING, RunStatus.COMPLETED, RunStatus.COMPLETED_WITH_ERRORS, RunStatus.CANCELLED,
                        RunStatus.FAILED]


class ErrorRecord(TypedDict, total=False):
    type: str
    message: str


class TokenUsage(TypedDict, total=False):
    prompt_tokens: int
    completion_tokens: int


class Rollout(TypedDict, total=False):
    """One results.jsonl row: one finished rollout. Extra `--state-columns` keys may follow.

    Rows written by older versions (or other tools) may lack any key: read them with `.get`."""

    example_id: Any  # an int for prime's own datasets; whatever the dataset gave otherwise
    rollout_idx: int
    prompt: Any  # a message list (chat) or a string (completion)
    completion: Any
    answer: Any
    task: str | None
    info: dict[str, Any] | None
    reward: float | None
    metrics: dict[str, float | None]
    error: ErrorRecord | str | None
    timing: dict[str, float]
    is_completed: bool
    is_truncated: bool
    stop_condition: str | None
    token_usage: TokenUsage | None
    metrics_errors: list[Any]
    judge_usage: dict[str, TokenUsage] | None  # JudgeRubric's tokens by judge model (results/cost.py)


ROW_KEYS: tuple[str, ...] = tuple(Rollout.__annotations__)


class Summary(TypedDict, total=False):
    """`prime_cli.results.summary.summarize`: what a run's rows add up to (metadata.json `summary`)."""

    num_rollouts: int
    num_scored: int  # the rollouts without an error: every score is over these
    num_examples: int
    rollouts_per_example: int
    avg_reward: float | None
    std_reward: float | None
    avg_reward_errors_as_zero: float | None  # the mean with errored rollouts as 0 (verifiers' avg_reward)
    avg_metrics: dict[str, float | None]
    std_metrics: dict[str, float | None]
    ci95: dict[str, Any]  # 95% intervals clustered by example: reward, metrics, pass_at_k, pass_hat_k (summary._intervals)
    pass_threshold: float
    pass_at_k: dict[str, float]  # k -> at least one of k rollouts passes (pass_k.py)
    pass_hat_k: dict[str, float]  # k -> all k rollouts pass (pass^k)
    stop_conditions: dict[str, int]
    avg_error: float
    error_kinds: dict[str, int]
    metrics_errors: dict[str, int]
    timing: dict[str, float | None]
    usage: dict[str, float | int | None]
    is_truncated: float
    reward_diversity: Any
    difficulty: Any
    per_task: dict[str, Summary]
    retries: dict[str, Any]
    error_budget: dict[str, Any]
    reward_check: dict[str, Any]  # every scored rollout got one reward: the `prime env check` command to run
    cost: dict[str, Any]  # dollars by role, with the prices used (results/cost.py)
    power: dict[str, Any]  # `--power DELTA`: examples needed to detect DELTA (summary.power_record)
    sandbox: dict[str, Any]  # provider, isolated, started, failed, start_p50_s, start_p95_s (evals/sandboxing.py)


class MetadataRecord(TypedDict, total=False):
    """metadata.json as stored: the JSON object the store reads, merges into and rewrites.

    Why two types for one file: the writer side (store, run_files, resume) merges a few fields at a
    time into the object as it was read and writes it back, so a key an older file (or another tool)
    lacks must stay absent and an unknown key must survive; `RunMetadata` fills defaults for
    readers (eval_run.load_run, export) and validates types. One pydantic model for both would write
    its defaults into every resumed run's file. `RunMetadata.from_record` / `to_record` convert.
    A new run's file starts with the header (records/header.py: format_version, kind, run_id, status,
    created_at, finished_at, error); `date` (local time with its offset) stays beside it."""

    format_version: int
    kind: str  # "eval"
    run_id: str
    created_at: str  # UTC
    finished_at: str | None
    error: str | None
    env_id: str
    env_args: dict[str, Any]
    model: str
    base_url: str | None
    local_model: bool  # the run was served by the embedded default model (`-m local`)
    api_key_var: str | None
    endpoints_path: str | None
    num_examples: int
    rollouts_per_example: int
    sampling_args: dict[str, Any]
    independent_scoring: bool
    date: str
    time_ms: float
    avg_reward: float | None
    avg_metrics: dict[str, float | None]
    pass_at_k: dict[str, float]
    pass_hat_k: dict[str, float]
    avg_error: float | None
    usage: dict[str, Any]
    version_info: dict[str, str]
    state_columns: list[str]
    tools: list[dict[str, Any]]
    reward_functions: list[str]
    status: str
    retries: dict[str, Any]
    error_budget: dict[str, Any]
    summary: Summary
    cost: dict[str, Any]  # the run's dollar cost by role and the prices used (prime_cli/results/cost.py)
    # a checkpoint sweep's run (`prime eval run --weights-dir`): {"weights_dir", "step" (None for the
    # base model), "adapter" (the served name, None for the base model)}
    sweep: dict[str, Any]
    # an environment that runs model-written code: {"provider", "isolated", "started", "failed",
    # "start_p50_s", "start_p95_s"} of this process's sandboxes (prime_cli/evals/sandboxing.py)
    sandbox: dict[str, Any]


class RunMetadata(BaseModel):
    """metadata.json, validated. Fields older files lack get their defaults; unknown keys are kept
    (`model_extra`) and written back by `to_record`. A file without `status` is another tool's
    finished run: it reads as `completed`."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, protected_namespaces=())

    env_id: str = "?"
    env_args: dict[str, Any] = Field(default_factory=dict)
    model: str = "?"
    base_url: str | None = None
    local_model: bool = False
    api_key_var: str | None = None
    endpoints_path: str | None = None
    num_examples: int | None = None
    rollouts_per_example: int | None = None
    sampling_args: dict[str, Any] = Field(default_factory=dict)
    independent_scoring: bool = False
    date: str = ""
    time_ms: float = 0.0
    avg_reward: float | None = None
    avg_metrics: dict[str, float | None] = Field(default_factory=dict)
    pass_at_k: dict[str, float] = Field(default_factory=dict)
    pass_hat_k: dict[str, float] = Field(default_factory=dict)
    avg_error: float | None = None
    usage: dict[str, Any] = Field(default_factory=dict)
    version_info: dict[str, Any] = Field(default_factory=dict)
    state_columns: list[str] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    reward_functions: list[str] = Field(default_factory=list)
    status: EvalRunStatus = RunStatus.COMPLETED
    retries: dict[str, Any] | None = None
    error_budget: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    cost: dict[str, Any] | None = None

    @classmethod
    def from_record(cls, record: MetadataRecord) -> RunMetadata:
        values = {key: value for key, value in record.items() if value is not None or key in _NULLABLE}
        return cls.model_validate(values)

    def to_record(self) -> MetadataRecord:
        """The JSON object to store; sections a run writes only when it ends are left out until set."""
        record = self.model_dump(mode="json")
        for key in _END_OF_RUN_SECTIONS:
            if record.get(key) is None:
                record.pop(key, None)
        return record  # type: ignore[return-value]


_NULLABLE = {name for name, info in RunMetadata.model_fields.items() if info.default is None}
_END_OF_RUN_SECTIONS = ("retries", "error_budget", "summary", "cost")


@dataclass(frozen=True)
class EvalRunLayout:
    """Every file and folder name of an eval run.

    `<root>/outputs/evals/<env_id>--<model>/<run_id>/` holds metadata.json, results.jsonl and
    eval.log; `<root>` is `<cwd>/environments/<env_module>/` when that folder exists, else `<cwd>`;
    `-o DIR` replaces `<root>/outputs/evals`. A `/` in an env id or model becomes `--`.
    """

    run_dir: Path

    METADATA = METADATA_FILE  # the same name for every kind of run
    RESULTS = "results.jsonl"
    LOG = "eval.log"
    INDEX = "results.index"  # a cache of the rows' small fields for the TUI (see row_index.py)

    @property
    def metadata_path(self) -> Path:
        return self.run_dir / self.METADATA

    @property
    def results_path(self) -> Path:
        return self.run_dir / self.RESULTS

    @property
    def log_path(self) -> Path:
        return self.run_dir / self.LOG

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    def is_run(self) -> bool:
        return self.metadata_path.is_file()

    @staticmethod
    def folder_name(name: str) -> str:
        """An env id or model as one folder-name part (`/` -> `--`)."""
        return name.replace("/", "--")

    @classmethod
    def runs_folder(cls, env_id: str, model: str, output_dir: PathLike | None = None,
                    cwd: PathLike | None = None) -> Path:
        """The folder a run of `env_id` with `model` is created in: `<root>/outputs/evals/<env>--<model>`."""
        from prime_cli.envs.loader import module_name  # lazy: already loaded

        base = Path(cwd) if cwd is not None else Path(".")
        name = f"{cls.folder_name(env_id)}--{cls.folder_name(model)}"
        if output_dir is not None:
            out = Path(output_dir).expanduser()
            return (out if out.is_absolute() else base / out) / name
        env_folder = base / "environments" / module_name(env_id)
        root = env_folder if env_folder.is_dir() else base
        return root / "outputs" / "evals" / name
