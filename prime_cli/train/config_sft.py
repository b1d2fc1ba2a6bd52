"""The config's sections for training beyond RL: supervised fine-tuning (SFT) from data or from a teacher's
rollouts, and on-policy distillation from a teacher (docs/training.md, "Beyond RL").

prime-rl's spellings are read: an SFT file's `[data] seq_len, batch_size` and `[[data.source]] dataset`
(config_aliases.sft_shape maps them here), `[orchestrator.algo] type = "dataset_sft"` with
`[orchestrator.algo.dataset]` inside an RL file, `[orchestrator.teacher_rollout_model]` with
`[trainer.loss] type = "sft"`, and `[trainer.loss] teacher_tau` with `[orchestrator.teacher_model]`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from .config_nodes import ClientConfig, Section

TEACHER_ADAPTER_NAME = "teacher"  # the name the run's own vLLM serves a teacher adapter under


class SftSource(Section):
    """One [[data.source]]: where SFT rows come from.

    `dataset`: a .jsonl/.json/.parquet file of `messages` (OpenAI chat fine-tuning rows) or `prompt`/`completion`,
    a Hugging Face dataset folder (save_to_disk, or data files), or a `prime eval run -s` run folder (or a folder
    of them), whose rollouts are kept when reward >= min_reward."""

    dataset: str
    split: str = "train"  # a dataset folder with several splits: the one to read
    min_reward: float | None = None  # eval runs: keep rollouts whose reward is at least this (None: every one)
    best_per_example: bool = False  # eval runs: only each example's best kept rollout
    ratio: float = Field(1.0, gt=0)  # with several sources: their share of each batch
    max_rows: int | None = Field(None, ge=1)  # the first N rows only


class SftDatasetConfig(Section):
    """[orchestrator.algo.dataset]: the SFT data (an SFT file's [[data.source]] lands here)."""

    source: list[SftSource] = Field(min_length=1)
    shuffle: bool = True  # a new order each epoch (seeded by the run's seed: exact on resume)

    @model_validator(mode="before")
    @classmethod
    def _prime_rl_name(cls, data: Any) -> Any:
        """prime-rl's `[orchestrator.algo.dataset] name = "..."`: one source."""
        if isinstance(data, dict) and "name" in data:
            data = dict(data)
            if "source" in data:
                raise ValueError("orchestrator.algo.dataset: name and source both name the data; keep one")
            data["source"] = [{"dataset": data.pop("name"),
                               **{k: data.pop(k) for k in ("split", "min_reward", "best_per_example") if k in data}}]
        return data


class AlgoConfig(Section):
    """[orchestrator.algo]: "rl" (sample the environments, learn from rewards) or "dataset_sft" (learn the
    assistant turns of a data set)."""

    type: Literal["rl", "dataset_sft"] = "rl"
    dataset: SftDatasetConfig | None = None

    @model_validator(mode="after")
    def _dataset(self) -> AlgoConfig:
        if self.type == "dataset_sft" and self.dataset is None:
            raise ValueError('orchestrator.algo.type = "dataset_sft" needs data: add [[data.source]] dataset = PATH '
                             "(or [orchestrator.algo.dataset] name = PATH)")
        if self.type == "rl" and self.dataset is not None:
            raise ValueError('orchestrator.algo.dataset is only read with orchestrator.algo.type = "dataset_sft"')
        return self


class TeacherModelName(Section):
    name: str


class TeacherConfig(Section):
    """A teacher model: a server of its own (`[...client] base_url` + `[...model] name`), or an adapter the
    run's own vLLM serves beside the policy (`adapter = PATH`, served as "teacher" on the run's base model)."""

    client: ClientConfig = Field(default_factory=ClientConfig)
    model: TeacherModelName | None = None
    adapter: str | None = None
    # the environment variable holding the teacher server's API key (never the key itself: it is read when the run
    # starts, from the environment or an env_file, and never written)
    api_key_var: str | None = None
    min_reward: float | None = None  # teacher rollouts: keep those whose reward is at least this
    best_per_example: bool = False  # teacher rollouts: only each example's best kept rollout

    @model_validator(mode="after")
    def _one_teacher(self) -> TeacherConfig:
        if self.adapter is not None and (self.client.base_url is not None or self.model is not None):
            raise ValueError("a teacher is either an adapter the run serves (adapter = PATH) or a server of its own "
                             "([...client] base_url and [...model] name): keep one")
        if self.adapter is None and self.model is None:
            raise ValueError("a teacher needs a model: [...model] name (with [...client] base_url for a server of its "
                             "own) or adapter = PATH (served by the run's vLLM)")
        if self.api_key_var is not None and not self.client.base_url:
            raise ValueError("a teacher's api_key_var is for a server of its own: set [...client] base_url, or remove it")
        if len(self.client.base_url or []) > 1:
            raise ValueError("a teacher's client.base_url names one server")
        return self

    @property
    def served_name(self) -> str:
        return TEACHER_ADAPTER_NAME if self.adapter is not None else self.model.name


class LossConfig(Section):
    """[trainer.loss]: the RL policy loss's ratio band, or "sft" (cross-entropy on the assistant tokens); with a
    teacher, the per-token reverse KL to it (teacher_tau) beside the environment's advantage (adv_tau)."""

    type: Literal["rl", "sft"] = "rl"
    ratio_low: float = Field(0.125, gt=0)
    ratio_high: float = Field(8.0, gt=0)
    log_ratio_clamp: float = Field(10.0, gt=0)
    teacher_tau: float = Field(0.0, ge=0)  # > 0: on-policy distillation from [orchestrator.teacher_model]
    adv_tau: float = Field(1.0, ge=0)  # the environment's advantage weight (0: distillation alone)

    @model_validator(mode="before")
    @classmethod
    def _default_type(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("type") == "default":  # prime-rl's name for the RL loss
            data = {**data, "type": "rl"}
        return data

    @model_validator(mode="after")
    def _band(self) -> LossConfig:
        if not self.ratio_low < 1.0 < self.ratio_high:
            raise ValueError(f"trainer.loss needs ratio_low < 1 < ratio_high (got {self.ratio_low} and "
                             f"{self.ratio_high}): the band must contain on-policy tokens (ratio 1)")
        return self


def check_algorithm(config: Any) -> None:
    """The loss follows the data: SFT rows train with cross-entropy, rollouts with the policy loss."""
    loss, orch = config.trainer.loss, config.orchestrator
    explicit = "type" in loss.model_fields_set
    if orch.is_sft and loss.type != "sft":
        if explicit:
            raise ValueError('trainer.loss.type = "rl" cannot train on SFT data (a data set or a teacher\'s '
                             'rollouts have no advantages): set it to "sft" or remove it')
        loss.__dict__["type"] = "sft"
    if not orch.is_sft and loss.type == "sft":
        raise ValueError('trainer.loss.type = "sft" needs something to imitate: [[data.source]] dataset = PATH, or '
                         "[orchestrator.teacher_rollout_model] (a teacher playing the environments)")
    if loss.type == "sft" and loss.teacher_tau > 0:
        raise ValueError("trainer.loss.teacher_tau is for on-policy distillation, which samples the environments; "
                         "an SFT run (a data set or a teacher's rollouts) imitates instead: remove teacher_tau")
    if loss.type == "rl" and loss.teacher_tau == 0 and loss.adv_tau == 0:
        raise ValueError("trainer.loss.adv_tau = 0 without teacher_tau > 0 leaves nothing to learn from: raise "
                         "adv_tau, or set teacher_tau with an [orchestrator.teacher_model]")
    if loss.teacher_tau > 0:
        _check_distillation(config)
    if orch.from_data:
        _check_shares(config)
    if loss.teacher_tau > 0 and orch.teacher_model is None:
        raise ValueError("trainer.loss.teacher_tau > 0 needs a teacher: [orchestrator.teacher_model] with "
                         "[orchestrator.teacher_model.client] base_url and [orchestrator.teacher_model.model] name, "
                         "or adapter = PATH")
    if orch.teacher_model is not None and loss.teacher_tau == 0:
        raise ValueError("[orchestrator.teacher_model] is used only with trainer.loss.teacher_tau > 0 (the weight "
                         "of the teacher's per-token KL); set it (e.g. 1.0) or remove the teacher")


def _check_distillation(config: Any) -> None:
    """The teacher's prompt log-probs are a plain softmax at temperature 1, and the student's are vLLM's processed
    ones: they compare only when sampling is plain too. Equal-reward groups still carry the teacher's signal."""
    sampling, buffer = config.orchestrator.sampling, config.orchestrator.buffer
    changed = [f"{key} = {getattr(sampling, key)}" for key, plain in (
        ("temperature", 1.0), ("top_p", 1.0), ("top_k", -1), ("min_p", 0.0), ("repetition_penalty", 1.0))
        if getattr(sampling, key) != plain]
    if changed:
        raise ValueError(f"trainer.loss.teacher_tau (distillation) needs plain sampling, but orchestrator.sampling "
                         f"sets {', '.join(changed)}: the teacher scores tokens at temperature 1 over the full "
                         "softmax, so the per-token KL would compare two different distributions; remove them")
    if config.trainer.loss.adv_tau == 0 and (buffer.online_difficulty_filtering or buffer.min_reward_variance):
        raise ValueError("orchestrator.buffer drops groups whose rewards are equal, but with adv_tau = 0 every "
                         "token carries the teacher's signal whatever the rewards: turn the filtering off")

def _check_shares(config: Any) -> None:
    """Each data source gets at least one row of every batch (a smaller share would never be trained)."""
    sources = config.orchestrator.algo.dataset.source
    total = sum(s.ratio for s in sources)
    for index, source in enumerate(sources):
        if config.orchestrator.batch_size * source.ratio / total < 1:
            raise ValueError(f"data source {index} ({source.dataset}) has ratio {source.ratio:g} of {total:g}, under "
                             f"one row of a batch of {config.orchestrator.batch_size}: it would never be trained; "
                             "raise its ratio or data.batch_size")
