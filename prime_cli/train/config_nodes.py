"""The config's sections for runs past one process group: inference servers the run does not start
([orchestrator.client]) and the nodes the parts run on ([deployment]); and `Section`, every section's base."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ClientConfig(Section):
    """[orchestrator.client] (prime-rl's key): inference servers the run samples from instead of starting one,
    e.g. `prime train CONFIG --part inference` on other nodes. A string or a list; None: the launcher starts vLLM."""

    base_url: list[str] | None = None

    @field_validator("base_url", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("base_url")
    @classmethod
    def _urls(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("orchestrator.client.base_url is an empty list: name at least one server, or remove "
                             "the key to let prime train start vLLM")
        for url in value:
            if not url.startswith(("http://", "https://")) or len(url.split("://", 1)[1]) == 0:
                raise ValueError(f"orchestrator.client.base_url: {url!r} is not an http(s) URL "
                                 "(e.g. http://10.0.0.2:8400/v1)")
        if len(set(value)) != len(value):
            raise ValueError("orchestrator.client.base_url names a server twice")
        return [url.rstrip("/") for url in value]


class DeploymentConfig(Section):
    """[deployment] (prime-rl's keys): where the parts run. multi_node: the trainer spans num_train_nodes
    nodes under torchrun's c10d rendezvous at rdzv_endpoint (the first trainer node's host:port), each node
    running `prime train CONFIG --part trainer --node-rank N` (docs/trainer.md, Scaling)."""

    type: Literal["single_node", "multi_node"] = "single_node"
    num_train_nodes: int = Field(1, ge=1)
    num_infer_nodes: int = Field(1, ge=1)
    gpus_per_node: int | None = Field(None, ge=1)
    rdzv_endpoint: str | None = None  # ours: under [slurm] the script sets it to the first trainer node

    @model_validator(mode="after")
    def _nodes(self) -> DeploymentConfig:
        if self.type == "single_node" and (self.num_train_nodes > 1 or self.num_infer_nodes > 1):
            raise ValueError("deployment.num_train_nodes / num_infer_nodes above 1 need deployment.type = "
                             "\"multi_node\"")
        if self.rdzv_endpoint is not None:
            host, _, port = self.rdzv_endpoint.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"deployment.rdzv_endpoint {self.rdzv_endpoint!r} is not HOST:PORT (e.g. \"10.0.0.1:29500\")")
        return self

    def check_rendezvous(self, slurm: bool) -> None:
        if self.num_train_nodes > 1 and self.rdzv_endpoint is None and not slurm:
            raise ValueError(f"deployment.num_train_nodes = {self.num_train_nodes} needs deployment.rdzv_endpoint = "
                             "\"HOST:PORT\" on the first trainer node (torchrun's c10d rendezvous), e.g. "
                             "\"10.0.0.1:29500\" (a [slurm] run sets it itself)")


class SlurmConfig(Section):
    """[slurm] (prime-rl's keys): `prime train CONFIG` writes an sbatch script for the run and submits it
    (`--dry-run` writes it only). Nodes: num_infer_nodes + num_train_nodes of [deployment] (one for single_node)."""

    job_name: str = "prime-train"
    partition: str | None = None
    account: str | None = None
    time: str | None = None  # sbatch --time, e.g. "24:00:00"
    nodelist: str | None = None
    exclude: str | None = None
    template_path: str | None = None  # a Jinja2 sbatch template replacing prime-lora's (also --slurm-template)
    pre_run_command: str | None = None  # a shell line run first on the batch node (e.g. `source .venv/bin/activate`)
    project_dir: str | None = None  # the folder every node runs `prime` from (default: the submitting folder)
    rdzv_port: int = Field(29500, ge=1, le=65535)  # ours: torchrun's rendezvous port on the first trainer node
