"""Harbor-format tasks (terminal-bench style) as a v1 taskset: `HarborTaskset`, run in podman or docker.

A Harbor task is a folder: `task.toml` (`[agent] timeout_sec`, `[verifier] timeout_sec`, `[environment]`
`cpus` / `memory_mb` / `storage_mb` / `workdir` / `docker_image`), `instruction.md` (what the agent is
asked), `environment/Dockerfile` (the machine it works on) and `tests/test.sh` (run after the agent; it
writes the reward to `/logs/verifier/reward.txt`, or `reward.json` with a "reward" key).

prime builds each task's Dockerfile with the container engine the user runs (verifiers needs a pullable
image instead): `prime-harbor-<task>:<hash of environment/>`, once, then a layer that gives the workdir,
`/logs` and `/tests` to the sandbox's uid (images.build_image). A `[environment] docker_image` is used as
it is (it must be present: nothing is pulled). The agent is prime's loop with one `bash` tool whose
commands run in the task's container (verifiers' `bash` harness); when it replies without a tool call,
its processes are stopped, `tests/` is copied to `/tests` and `bash /tests/test.sh` runs in the same
container as the grader. Timeouts are the task's times `timeout_multiplier`; resources its times
`resource_multiplier`. No network, as in every prime sandbox.
"""

from __future__ import annotations

import hashlib
import json
import re
import tarfile
import tomllib
from io import BytesIO
from pathlib import Path
from typing import Any

from pydantic import Field

from prime_cli.sandbox import chosen_name
from prime_cli.sandbox.images import build_image, ensure_base_image

from ..errors import EnvConfigError
from .decorators import reward, tool
from .runtime import rollout_runtime
from .task import Task, TaskConfig, TaskData, TaskResources, TaskTimeout
from .taskset import Taskset, TasksetConfig
from .toolset import Toolset, ToolsetConfig

__all__ = ["HarborTaskset"]  # the one taskset of the built-in environment `harbor` (loader.BUILTIN_ENVIRONMENTS)

REWARD_TXT, REWARD_JSON = "/logs/verifier/reward.txt", "/logs/verifier/reward.json"
WRITABLE = ["/logs/verifier", "/tests"]
SYSTEM_PROMPT = ("You are working in a Linux container. Use the bash tool to run commands (each call is a fresh "
                 "shell in the task's working directory). When the task is done, reply without calling a tool.")
class BashToolset(Toolset[ToolsetConfig]):
    @tool
    async def bash(self, command: str) -> str:
        """Run a bash command in the task's container and return its exit code and output.

        Args:
            command: the command line, run with `bash -lc` in the working directory.
        """
        runtime = rollout_runtime()
        if runtime is None:
            raise RuntimeError("no container for this rollout")
        result = await runtime.run(["bash", "-lc", command])
        return f"exit code {result.exit_code}\n{result.stdout}{result.stderr}"


class HarborTaskConfig(TaskConfig):
    reward_key: str = Field("reward", min_length=1)


class HarborConfig(TasksetConfig):
    path: Path = Path("tasks")  # a folder of Harbor task folders, or one task folder
    tasks: list[str] | None = None  # only these task folders (by name)
    timeout_multiplier: float = Field(1.0, gt=0)
    resource_multiplier: float = Field(1.0, gt=0)
    task: HarborTaskConfig = HarborTaskConfig()


class HarborData(TaskData):
    task_dir: str = ""
    verifier_timeout: float = 600.0
    difficulty: str | None = None
    category: str | None = None
    tags: list[str] = Field(default_factory=list)


class HarborTask(Task[HarborData, Any, HarborTaskConfig]):
    NEEDS_CONTAINER = True

    @classmethod
    def toolsets(cls, config: Any) -> list[Toolset]:
        return [BashToolset()]

    @reward
    async def tests_pass(self, runtime: Any) -> float:
        """What `tests/test.sh` wrote, run in the task's container after the agent (its processes stopped)."""
        sandbox = await runtime.sandbox()
        await sandbox.stop_processes()
        await runtime.write("/tmp/prime-harbor-tests.tgz", _tests_archive(Path(self.data.task_dir) / "tests"))
        setup = (f"rm -rf /tests/* {REWARD_TXT} {REWARD_JSON} && mkdir -p /logs/verifier /tests && "
                 "tar -xzf /tmp/prime-harbor-tests.tgz -C /tests")
        staged = await sandbox.exec(["/bin/sh", "-c", setup], timeout=120)
        if not staged.ok:
            raise RuntimeError(f"could not copy tests/ into the container: {staged.output.strip()[-300:]}")
        result = await sandbox.exec(["bash", "/tests/test.sh"], cwd=self.data.workdir or None,
                                    timeout=self.data.verifier_timeout)
        if result.timed_out:
            raise RuntimeError(f"tests/test.sh did not finish in {self.data.verifier_timeout:.0f} s")
        return await self._reward(runtime, result.output)

    async def _reward(self, runtime: Any, output: str) -> float:
        try:
            scores = json.loads(await runtime.read(REWARD_JSON))
            return float(scores[self.config.reward_key])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        try:
            return float((await runtime.read(REWARD_TXT)).decode().strip())
        except (OSError, ValueError):
            raise RuntimeError("tests/test.sh wrote no reward (neither /logs/verifier/reward.json nor reward.txt); "
                               f"its output ended: {output.strip()[-300:]}") from None


class HarborTaskset(Taskset[HarborTask, HarborConfig]):
    def load(self) -> list[HarborTask]:
        folders = task_folders(self.config.path, self.config.tasks)
        engine = container_engine()
        return [self._task(folder, engine) for folder in folders]

    def _task(self, folder: Path, engine: str) -> HarborTask:
        config = self.config
        try:
            spec = tomllib.loads((folder / "task.toml").read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise EnvConfigError(f"{folder}/task.toml: {exc}") from None
        instruction = folder / "instruction.md"
        if not instruction.is_file() or not (folder / "tests" / "test.sh").is_file():
            raise EnvConfigError(f"{folder}: a Harbor task needs instruction.md and tests/test.sh")
        environment, meta = spec.get("environment", {}), spec.get("metadata", {})
        image = environment.get("docker_image") or self._build(folder, engine)
        times = config.timeout_multiplier
        grow = config.resource_multiplier
        resources = TaskResources(cpu=environment["cpus"] * grow if environment.get("cpus") else None,
                                  memory=environment["memory_mb"] / 1024 * grow if environment.get("memory_mb") else None,
                                  disk=environment["storage_mb"] / 1024 * grow if environment.get("storage_mb") else None)
        return HarborTask(HarborData(
            name=folder.name, prompt=instruction.read_text(), system_prompt=SYSTEM_PROMPT, image=image,
            workdir=environment.get("workdir") or "/app", task_dir=str(folder.resolve()),
            timeout=TaskTimeout(agent=spec.get("agent", {}).get("timeout_sec", 600.0) * times),
            verifier_timeout=spec.get("verifier", {}).get("timeout_sec", 600.0) * times, resources=resources,
            difficulty=meta.get("difficulty"), category=meta.get("category"), tags=list(meta.get("tags", []))),
            config.task)

    def _build(self, folder: Path, engine: str) -> str:
        context = folder / "environment"
        if not (context / "Dockerfile").is_file():
            raise EnvConfigError(f"{folder}: no [environment] docker_image in task.toml and no environment/Dockerfile")
        ensure_base_image(engine)  # what the tasks' Dockerfiles may build FROM (no registry is reachable)
        digest = hashlib.sha256(_tests_archive(context, deterministic=True)).hexdigest()[:16]
        name = re.sub(r"[^a-z0-9_.-]+", "-", folder.name.lower()).strip("-.") or "task"
        return build_image(engine, context, f"localhost/prime-harbor-{name}:{digest}", WRITABLE)


def task_folders(path: Path, only: list[str] | None) -> list[Path]:
    root = Path(path).expanduser()
    if (root / "task.toml").is_file():
        found = [root]
    elif root.is_dir():
        found = sorted(p.parent for p in root.glob("*/task.toml"))
    else:
        raise EnvConfigError(f"no Harbor tasks at {root}: give -a '{{\"path\": \"<a folder of task folders>\"}}'")
    if only is not None:
        missing = sorted(set(only) - {p.name for p in found})
        if missing:
            raise EnvConfigError(f"no Harbor task folder named {', '.join(missing)} under {root}")
        found = [p for p in found if p.name in only]
    if not found:
        raise EnvConfigError(f"no Harbor task folder (one with a task.toml) under {root}")
    return found


def container_engine() -> str:
    """podman or docker: the user's --sandbox / PRIME_SANDBOX choice, else podman."""
    engine = chosen_name("podman")
    if engine not in ("podman", "docker"):
        raise EnvConfigError(f"Harbor tasks run in a container: pick --sandbox podman or docker (not {engine})")
    return engine


def _tests_archive(folder: Path, deterministic: bool = False) -> bytes:
    buffer = BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz" if not deterministic else "w") as archive:
        for path in sorted(folder.rglob("*")):
            info = archive.gettarinfo(str(path), arcname=str(path.relative_to(folder)))
            if deterministic:
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if path.is_file():
                with path.open("rb") as handle:
                    archive.addfile(info, handle)
            else:
                archive.addfile(info)
    return buffer.getvalue()
