"""The training config: one model for the prime-rl (v0.4) TOML shape (see docs/trainer.md).

Every section forbids unknown keys; cross-section rules (batch divisibility, sequence lengths,
model names) are checked here so `prime train --dry-run` catches them before anything starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .config_eval import OnlineEvalConfig
from .config_nodes import ClientConfig, DeploymentConfig, Section, SlurmConfig
from .config_sft import AlgoConfig, LossConfig, TeacherConfig, check_algorithm
from .config_wandb import LogExtrasConfig

# vLLM's sampling penalties that the trainer does not apply to its logits (a non-zero value is refused)
UNMATCHED_PENALTIES = ("presence_penalty", "frequency_penalty")
DEFAULT_TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def default_output_dir(env_id: str, kind: str = "rl") -> str:
    """Where a run writes when the config names no output_dir: `outputs/rl/<env id>` (`outputs/sft/...` for SFT)."""
    return f"outputs/{kind}/{env_id.replace('/', '--')}"


class ModelConfig(Section):
    name: str = "local"
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    adapter: str | None = None  # a PEFT LoRA adapter folder to start from (an SFT run's weights/step_N)


class LoraConfig(Section):
    rank: int = Field(16, ge=1)
    alpha: float = Field(32.0, gt=0)
    dropout: float = Field(0.0, ge=0, lt=1)
    target_modules: list[str] = Field(default_factory=lambda: list(DEFAULT_TARGET_MODULES), min_length=1)


class ActivationCheckpointConfig(Section):
    freq: int = Field(1, ge=1)


class TrainerModelConfig(Section):
    name: str | None = None
    lora: LoraConfig = Field(default_factory=LoraConfig)
    ac: ActivationCheckpointConfig | None = None
    # with several trainer processes: shard the base model across them (FSDP2) instead of a full copy each
    fsdp: bool = True
    reshard_after_forward: bool = True  # FSDP2: free gathered layer weights after forward (less memory)
    # the trainable (LoRA) weights and the optimizer state; the frozen base computes in model.dtype
    optimization_dtype: Literal["bfloat16", "float32"] = "float32"
    # with a bf16 base model and fp32 adapter weights: the adapters compute in bf16 (autocast), their weights,
    # gradients and optimizer state staying fp32, instead of fp32 casts around every adapted projection
    mixed_precision: bool = True
    # torch.compile each decoder layer (fused elementwise kernels between the matmuls); None: on CUDA only
    compile: bool | None = None
    # attention on packed rows: "varlen", one flash-attention varlen kernel per layer for the whole row
    # (CUDA, bf16/fp16); "sdpa", one SDPA call per sample; "auto": varlen where it runs, else sdpa
    attention: Literal["auto", "sdpa", "varlen"] = "auto"
    # Mixture-of-Experts models: how transformers runs the experts. "grouped_mm", one grouped GEMM over all
    # experts per projection; "eager", a loop over the experts that got tokens; "auto": grouped_mm
    experts_implementation: Literal["auto", "grouped_mm", "batched_mm", "eager"] = "auto"
    reduce_dtype: Literal["bfloat16", "float32"] = "float32"  # FSDP2 gradient reduction across ranks
    fsdp_cpu_offload: bool = False  # FSDP2: keep the sharded weights on the CPU between uses


class TokenizerConfig(Section):
    name: str | None = None


class OptimConfig(Section):
    lr: float = Field(1e-4, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    betas1: float = Field(0.9, ge=0, lt=1)
    betas2: float = Field(0.999, ge=0, lt=1)
    max_norm: float = Field(1.0, gt=0)


class SchedulerConfig(Section):
    type: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = Field(0, ge=0)
    min_lr: float = Field(0.0, ge=0)


class CheckpointConfig(Section):
    interval: int = Field(5, ge=1)
    keep_last: int | None = Field(None, ge=1)  # keep the newest N checkpoints (None: all)
    keep_interval: int | None = Field(None, ge=1)  # and, besides them, every checkpoint whose step is a multiple of N


class TrainerConfig(Section):
    model: TrainerModelConfig = Field(default_factory=TrainerModelConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    loss: LossConfig = Field(default_factory=LossConfig)
    ckpt: CheckpointConfig = Field(default_factory=CheckpointConfig)
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    # packing: a step's samples end to end in rows of at most micro_batch_tokens tokens (default seq_len),
    # one row per forward/backward pass, attention kept within each sample; no token is padding
    pack: bool = True
    micro_batch_tokens: int | None = Field(None, ge=16)
    # samples per pass without packing (padded to the longest), and per pass of a prompt group on a shared KV cache
    micro_batch_size: int = Field(8, ge=1)
    save_merged: bool = False


class SamplingConfig(Section):
    temperature: float = Field(1.0, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int = Field(-1, ge=-1)
    min_p: float = Field(0.0, ge=0, le=1)
    repetition_penalty: float = Field(1.0, gt=0)
    max_tokens: int | None = Field(None, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _unmatched_penalties(cls, data: Any) -> Any:
        # the trainer applies top_p, top_k, min_p and repetition_penalty to its logits as vLLM does
        # (prime_lora/trainer/sampling.py); these two it does not, so its log-probs would not be vLLM's
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for key in UNMATCHED_PENALTIES:
            value = data.pop(key, 0.0)
            if value != 0:
                raise ValueError(f"orchestrator.sampling.{key} = {value} is not supported: the trainer does not "
                                 "apply it to its logits, so it would learn from another distribution than vLLM "
                                 f"samples from; remove it (or set {key} = 0), or use repetition_penalty")
        return data


class BufferConfig(Section):
    online_difficulty_filtering: bool = False  # drop groups whose rewards are all equal (no signal)
    # prime-rl's pools: an example whose group mean reward reaches easy_threshold (or falls to hard_threshold)
    # is marked easy (hard) and not drawn again; the thresholds act with or without filtering
    easy_threshold: float | None = Field(None, ge=0, le=1)
    hard_threshold: float | None = Field(None, ge=0, le=1)
    min_reward_variance: float | None = Field(None, ge=0)  # drop groups whose reward variance is below it

    @model_validator(mode="after")
    def _thresholds(self) -> BufferConfig:
        if self.easy_threshold is not None and self.hard_threshold is not None \
                and self.easy_threshold <= self.hard_threshold:
            raise ValueError(f"orchestrator.buffer.easy_threshold ({self.easy_threshold}) must be above "
                             f"orchestrator.buffer.hard_threshold ({self.hard_threshold})")
        return self


class EnvEntry(Section):
    id: str
    args: dict[str, Any] = Field(default_factory=dict)
    ratio: float = Field(1.0, gt=0)


class OrchestratorConfig(Section):
    batch_size: int = Field(64, ge=1)
    rollouts_per_example: int = Field(8, ge=1)
    oversampling_factor: float = Field(1.0, ge=1.0)
    max_async_level: int = Field(1, ge=0)
    max_concurrent: int = Field(32, ge=1)
    seed: int | None = None
    # multi-turn rollouts: interleaved merges the turns into one sample while each prompt extends the
    # sequence (else splits, with a warning); branching makes one sample per model call
    trajectory_strategy: Literal["interleaved", "branching"] = "interleaved"
    # the run's sampled rollouts failing clearly past this fraction (a reward function or the environment
    # raised, no token ids; the policy's own errors not counted; judged from 64 rollouts on by the eval's
    # rule, prime_cli/results/error_budget.py, or a step whose every rollout failed) stops the run; 0.1 like
    # `prime eval run --max-error-rate` (prime_cli.evals.config.DEFAULT_MAX_ERROR_RATE; a test keeps them equal)
    max_error_rate: float = Field(0.1, gt=0.0, le=1.0)
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    buffer: BufferConfig = Field(default_factory=BufferConfig)
    env: list[EnvEntry] = Field(default_factory=list)
    eval: OnlineEvalConfig | None = None
    client: ClientConfig = Field(default_factory=ClientConfig)
    algo: AlgoConfig = Field(default_factory=AlgoConfig)
    teacher_rollout_model: TeacherConfig | None = None  # SFT on what this teacher writes in the environments
    teacher_model: TeacherConfig | None = None  # on-policy distillation: scores the policy's tokens

    @property
    def from_data(self) -> bool:
        """SFT on a data set: no environment is sampled for training."""
        return self.algo.type == "dataset_sft"

    @property
    def is_sft(self) -> bool:
        return self.from_data or self.teacher_rollout_model is not None

    @model_validator(mode="after")
    def _divisible(self) -> OrchestratorConfig:
        if self.from_data and self.teacher_rollout_model is not None:
            raise ValueError("SFT reads either a data set ([[data.source]]) or a teacher's rollouts "
                             "([orchestrator.teacher_rollout_model]), not both: keep one")
        if not self.from_data and not self.env:
            raise ValueError("orchestrator.env is empty: add an [[orchestrator.env]] id = \"ENV\" to train on "
                             "(or [[data.source]] dataset = PATH for SFT on a data set)")
        if self.from_data and self.eval is not None and not self.eval.env:
            raise ValueError("[orchestrator.eval] of an SFT run on a data set needs its environments: add "
                             "[[orchestrator.eval.env]] id = \"ENV\" (an SFT file's [[eval.env]])")
        if self.is_sft:
            return self  # rows are samples: no group, no advantage
        if self.rollouts_per_example < 2:
            raise ValueError(f"orchestrator.rollouts_per_example must be at least 2 (got {self.rollouts_per_example}): "
                             "an advantage is a reward minus its group's mean, so a group of one rollout never "
                             "learns anything; use 2 or more (8 is usual)")
        if self.batch_size % self.rollouts_per_example:
            raise ValueError(f"orchestrator.batch_size must be divisible by orchestrator.rollouts_per_example "
                             f"(got {self.batch_size} and {self.rollouts_per_example})")
        # one orchestrator worker runs a group's rollouts at once: a lower limit would serialise them
        if "max_concurrent" in self.model_fields_set and self.max_concurrent < self.rollouts_per_example:
            raise ValueError(f"orchestrator.max_concurrent ({self.max_concurrent}) must be at least "
                             f"orchestrator.rollouts_per_example ({self.rollouts_per_example}) x 1 orchestrator worker; "
                             "raise max_concurrent or remove it")
        return self


class InferenceModelConfig(Section):
    name: str | None = None
    max_model_len: int = Field(2048, ge=16)
    dtype: Literal["auto", "float16", "bfloat16", "float32"] | None = None  # vLLM --dtype (None: model.dtype)
    enable_auto_tool_choice: bool = False
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None


class InferenceConfig(Section):
    model: InferenceModelConfig = Field(default_factory=InferenceModelConfig)
    host: str = "127.0.0.1"
    port: int = Field(8400, ge=1, le=65535)
    max_lora_rank: int | None = Field(None, ge=1)
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    kv_cache_gib: int = Field(1, ge=1)
    tensor_parallel_size: int = Field(1, ge=1)
    data_parallel_size: int = Field(1, ge=1)
    vllm_args: list[str] = Field(default_factory=list)


class WandbConfig(Section):
    project: str = "prime"
    name: str | None = None
    entity: str | None = None
    group: str | None = None
    tags: list[str] = Field(default_factory=list)
    id: str | None = None  # a W&B run id to continue (resume="allow")
    mode: Literal["online", "offline"] = "offline"
    offline: bool | None = None  # prime-rl's spelling: true = mode "offline", false = mode "online"
    log_extras: LogExtrasConfig | None = None  # prime-rl's: sampled rollouts and distributions (config_wandb)

    @field_validator("log_extras", mode="before")
    @classmethod
    def _switch(cls, value: Any) -> Any:
        """`log_extras = true` turns the extras on with their defaults, `false` off."""
        return ({} if value else None) if isinstance(value, bool) else value

    @model_validator(mode="after")
    def offline_means_mode(self) -> WandbConfig:
        if self.offline is None:
            return self
        wanted = "offline" if self.offline else "online"
        if "mode" in self.model_fields_set and self.mode != wanted:
            raise ValueError(f"wandb.offline = {str(self.offline).lower()} contradicts wandb.mode = "
                             f"\"{self.mode}\": keep one of them")
        self.__dict__["mode"] = wanted
        return self


class RLConfig(Section):
    inference_gpu_ids: list[int] = Field(default_factory=lambda: [0])
    trainer_gpu_ids: list[int] = Field(default_factory=lambda: [0])
    max_steps: int = Field(20, ge=1)
    seq_len: int = Field(2048, ge=16)
    # default: outputs/rl/<first environment id>, never `outputs` itself, where `prime eval run -s` saves
    output_dir: str = ""
    seed: int = 0
    env_file: list[str] = Field(default_factory=list)  # KEY=VALUE files loaded into every part's environment
    model: ModelConfig = Field(default_factory=ModelConfig)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    orchestrator: OrchestratorConfig
    inference: InferenceConfig = Field(default_factory=InferenceConfig)
    deployment: DeploymentConfig = Field(default_factory=DeploymentConfig)
    slurm: SlurmConfig | None = None
    wandb: WandbConfig | None = None

    @property
    def policy_name(self) -> str:
        """The LoRA adapter name vLLM serves the policy under."""
        return "policy"

    @property
    def inference_dtype(self) -> str:
        """vLLM's --dtype: [inference.model] dtype, else model.dtype."""
        return self.inference.model.dtype or self.model.dtype

    @property
    def orchestrator_seed(self) -> int:
        return self.seed if self.orchestrator.seed is None else self.orchestrator.seed

    @property
    def is_sft(self) -> bool:
        return self.trainer.loss.type == "sft"

    @property
    def needs_inference(self) -> bool:
        """Whether the run needs its own vLLM server: not for SFT on a data set, nor on the rollouts of a teacher
        with a server of its own, unless online evals run (they evaluate the adapter)."""
        orch = self.orchestrator
        teacher = orch.teacher_rollout_model
        elsewhere = orch.from_data or (teacher is not None and teacher.client.base_url is not None)
        return not elsewhere or orch.eval is not None

    @model_validator(mode="after")
    def _default_output_dir(self) -> RLConfig:
        if not self.output_dir:
            orch = self.orchestrator
            if orch.from_data:
                stem = Path(orch.algo.dataset.source[0].dataset.rstrip("/")).stem or "data"
                self.__dict__["output_dir"] = f"outputs/sft/{stem}"
            else:
                self.__dict__["output_dir"] = default_output_dir(orch.env[0].id, "sft" if orch.is_sft else "rl")
        return self

    @model_validator(mode="after")
    def _algorithm(self) -> RLConfig:
        check_algorithm(self)
        return self

    @model_validator(mode="after")
    def _cross_section(self) -> RLConfig:
        for key, name in (("trainer.model.name", self.trainer.model.name),
                          ("trainer.tokenizer.name", self.trainer.tokenizer.name),
                          ("inference.model.name", self.inference.model.name)):
            if name is not None and name != self.model.name:
                raise ValueError(f"{key} ({name!r}) differs from model.name ({self.model.name!r}): the trainer "
                                 "and vLLM must run the same model; remove it or make them equal")
        if not self.orchestrator.from_data and self.seq_len < self.inference.model.max_model_len:
            raise ValueError(f"seq_len ({self.seq_len}) is below inference.model.max_model_len "
                             f"({self.inference.model.max_model_len}): the trainer would cut samples vLLM can "
                             "produce; raise seq_len or lower max_model_len")
        max_tokens = self.orchestrator.sampling.max_tokens
        if max_tokens is not None and max_tokens >= self.inference.model.max_model_len:
            # vLLM answers 400 when prompt + max_tokens exceeds max_model_len, and a prompt has a token at least
            raise ValueError(f"orchestrator.sampling.max_tokens ({max_tokens}) must be below "
                             f"inference.model.max_model_len ({self.inference.model.max_model_len}): vLLM refuses a "
                             "call whose prompt + max_tokens exceeds max_model_len, so every rollout would fail; "
                             "lower max_tokens or raise max_model_len (and seq_len with it)")
        deployment = self.deployment
        deployment.check_rendezvous(slurm=self.slurm is not None)
        if deployment.gpus_per_node is not None:
            for key, ids in (("trainer_gpu_ids", self.trainer_gpu_ids), ("inference_gpu_ids", self.inference_gpu_ids)):
                if any(i >= deployment.gpus_per_node for i in ids):
                    raise ValueError(f"{key} {ids} names a GPU beyond deployment.gpus_per_node "
                                     f"({deployment.gpus_per_node}): GPU ids count from 0 on each node")
        urls = self.orchestrator.client.base_url
        if deployment.type == "multi_node" and urls is not None and len(urls) < deployment.num_infer_nodes:
            raise ValueError(f"deployment.num_infer_nodes is {deployment.num_infer_nodes} but orchestrator.client."
                             f"base_url names {len(urls)} server{'s' if len(urls) != 1 else ''}: list each inference "
                             "node's URL")
        lora_rank = self.trainer.model.lora.rank
        if self.inference.max_lora_rank is not None and self.inference.max_lora_rank < lora_rank:
            raise ValueError(f"inference.max_lora_rank ({self.inference.max_lora_rank}) is below "
                             f"trainer.model.lora.rank ({lora_rank}); vLLM could not load the adapter")
        return self
