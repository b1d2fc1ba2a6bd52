"""Run the three parts of a training run and watch them.

inference (vLLM with LoRA, runtime adapter loading), trainer (torch + peft) and orchestrator
(rollouts through prime environments) are separate processes, each in its own process group with
its log in `logs/`. If any part dies, all stop and the failing part's last log lines are shown:
an error never hides in another process's log.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from prime_cli.train.plugin_api import (
    ManagedProcess,
    RLConfig,
    ServeError,
    TrainingRunLayout,
    env_file_values,
    eval_summary_line,
    visible,
)

from . import run_dir
from .devices import cpu_split, has_cuda, part_env
from .inference import InferenceServer, inference_options
from .orchestrator.rollout_errors import FATAL_PREFIX, FAULT_EXIT_CODE
from .progress import SERVER_NOTICE, WANDB_NOTICE, MetricsTail, NoticeTail, reward_curve, step_line

POLL_S = 0.5


@dataclass
class PartFailure(Exception):
    part: str
    message: str


@dataclass
class RunStopped(Exception):
    """The orchestrator stopped the run on purpose (a fault threshold, an empty batch): its `fatal:` line."""

    cause: str




def fatal_line(log_path: Path) -> str | None:
    """The last `fatal: ...` line of a part's log (without the prefix), if any."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    return next((line[len(FATAL_PREFIX):] for line in reversed(lines) if line.startswith(FATAL_PREFIX)), None)


def trainer_command(config: RLConfig, config_path: Path, resume_step: int | None, node_rank: int = 0) -> list[str]:
    module = ["-m", "prime_lora.trainer", "--config", str(config_path)]
    if resume_step is not None:
        module += ["--resume-step", str(resume_step)]
    per_node = len(config.trainer_gpu_ids) if has_cuda() else 1  # FSDP: one process per trainer GPU
    nodes = config.deployment.num_train_nodes
    if nodes > 1:  # this node's agent of torchrun's c10d rendezvous (the same id on every node: the run's folder)
        run_id = hashlib.sha1(str(config_path.parent.resolve()).encode()).hexdigest()[:16]
        return [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nodes}", f"--node-rank={node_rank}",
                "--rdzv-backend=c10d", f"--rdzv-endpoint={config.deployment.rdzv_endpoint}", f"--rdzv-id={run_id}",
                f"--nproc-per-node={per_node}", *module]
    if per_node > 1:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={per_node}", *module]
    return [sys.executable, *module]


def orchestrator_command(config_path: Path, base_urls: list[str], resume_step: int | None) -> list[str]:
    command = [sys.executable, "-m", "prime_lora.orchestrator", "--config", str(config_path)]
    for url in base_urls:
        command += ["--base-url", url]
    return command + (["--resume-step", str(resume_step)] if resume_step is not None else [])


class Run:
    """One training run's processes and the watch loop over them."""

    def __init__(self, config: RLConfig, output_dir: Path, resume_step: int | None, console: Console,
                 parts_config: Path | None = None, part: str | None = None, node_rank: int = 0):
        self.config, self.output_dir, self.resume_step, self.console = config, output_dir, resume_step, console
        self.part = part  # None: every part here; "trainer" or "orchestrator": that one alone (parts.py)
        self.node_rank = node_rank  # of the trainer's nodes ([deployment] num_train_nodes)
        self.layout = TrainingRunLayout(output_dir)
        self.logs = self.layout.logs_dir
        self.config_path = parts_config or self.layout.config_path  # what the parts read
        self.inference: InferenceServer | None = None
        self.trainer = ManagedProcess(self.layout.log_path("trainer" if not node_rank else f"trainer_node{node_rank}"))
        self.orchestrator = ManagedProcess(self.layout.log_path("orchestrator"))
        self.metrics = MetricsTail(self.layout.metrics_path)
        self.metrics.poll()  # a resumed run's earlier steps are not printed again, nor counted
        self.metrics.rows = []
        self.evals = MetricsTail(self.layout.evals_path)  # [orchestrator.eval]: one line per eval
        self.evals.poll()
        self.trainer_notices = NoticeTail(self.layout.log_path("trainer"), WANDB_NOTICE)
        self.server_notices = NoticeTail(self.layout.log_path("orchestrator"), SERVER_NOTICE)
        self.pending_notices: list[tuple[int, str]] = []  # (the trainer's step before it, line)
        self.stopped = False
        self.shown_step = resume_step or 0
        # env_file variables for every part (read here, kept in memory only, never written or logged)
        self.extra_env = env_file_values(config.env_file)

    def parts(self) -> dict[str, ManagedProcess | None]:
        return {"inference": self.inference, "trainer": self.trainer, "orchestrator": self.orchestrator}

    def start(self) -> None:
        urls = self.config.orchestrator.client.base_url
        if self.part != "orchestrator":
            if urls is None and self.part is None:
                self.start_inference()
            # the trainer loads its model while vLLM starts; the orchestrator needs vLLM up
            self.trainer.start_command(trainer_command(self.config, self.config_path, self.resume_step, self.node_rank),
                                       {**part_env(self.config.trainer_gpu_ids, cpus=cpu_split()[1], part="trainer"),
                                        **self.extra_env},
                                       cwd=Path.cwd())
        if self.inference is not None:
            self.wait_for_inference()
            urls = [self.inference.options.url]
        if self.part != "trainer":
            self.orchestrator.start_command(orchestrator_command(self.config_path, urls, self.resume_step),
                                            {**part_env([]), **self.extra_env}, cwd=Path.cwd())

    def start_inference(self) -> None:
        from prime_cli.train.plugin_api import training_weights

        resolved = training_weights(self.config.model.name)
        options = inference_options(self.config, str(resolved.path), resolved.served_name)
        self.inference = InferenceServer(options, self.layout.log_path("inference"), self.config.inference_gpu_ids,
                                         self.extra_env)
        self.inference.start()

    def wait_for_inference(self) -> None:
        with self.console.status("starting vLLM and the trainer") as status:
            started = time.monotonic()
            self.check_alive(during_start=True)
            try:
                self.inference.wait_ready(lambda s: (status.update(f"starting vLLM ({s:.0f} s)"),
                                                     self.check_alive(during_start=True)))
            except ServeError as exc:
                raise PartFailure("inference", str(exc)) from None
            self.console.print(f"[dim]vLLM ready at {self.inference.options.url} in {time.monotonic() - started:.0f} s "
                               f"(log: {self.inference.log_path})[/dim]")

    def check_alive(self, during_start: bool = False) -> bool:
        """Raise PartFailure when a part died; True once the trainer finished every step and the orchestrator
        its last batch (and, with [orchestrator.eval], the eval of the last step)."""
        trained = False
        for name, part in self.parts().items():
            if part is None or part.process is None:
                continue
            code = part.returncode
            if code is None:
                continue
            if name == "trainer" and code == 0 and not during_start:
                trained = True
                continue
            if name == "orchestrator" and code == 0:
                if self.part == "orchestrator":
                    return True  # the trainer part, elsewhere, has the last word on its own node
                continue  # it finishes its last batch before the trainer finishes its last step
            if name == "orchestrator" and code == FAULT_EXIT_CODE and (cause := fatal_line(part.log_path)):
                raise RunStopped(cause)
            raise PartFailure(name, f"the {name} {'exited' if code >= 0 else 'was killed'} (code {code})"
                                    f"{' before training ended' if code == 0 else ''}. "
                                    f"Last lines of {part.log_path}:\n{part.log_tail()}")
        # without [orchestrator.eval] the orchestrator has nothing left to do once the trainer is done (it is
        # stopped); with it, the orchestrator still evaluates the last step's adapter
        orchestrator = (self.config.orchestrator.eval is None or self.orchestrator.process is None
                        or self.orchestrator.returncode is not None)
        return trained and orchestrator

    def show_progress(self, status) -> None:
        """New step lines, and the trainer's notices (W&B) each after the step it followed."""
        max_steps = self.config.max_steps
        rows = self.metrics.poll()
        self.pending_notices += self.trainer_notices.poll() + self.server_notices.poll()
        if rows:
            self.promote_config()
        for row in rows:
            if self.reports:
                self.print_notices(before_step=row.get("step", 0))
                self.console.print(visible(step_line(row, max_steps, str(self.orchestrator.log_path))),
                                   highlight=False, markup=False)  # error kinds name reward functions and env errors
            status.update(f"step {min(row.get('step', 0) + 1, max_steps)}/{max_steps}")
            self.shown_step = row.get("step", 0)
        if self.reports:
            self.print_notices(before_step=self.shown_step + 1)
            self.print_evals()

    @property
    def owns_folder(self) -> bool:
        """The whole run, or the trainer part of node 0: it prepared output_dir and alone rewrites its files."""
        return self.part in (None, "trainer") and self.node_rank == 0

    @property
    def reports(self) -> bool:
        """Whether this launcher prints the run's steps: the folder's owner (one terminal shows them; the
        orchestrator part and the other trainer nodes only say when they end)."""
        return self.owns_folder

    def print_notices(self, before_step: int) -> None:
        due = [line for after, line in self.pending_notices if after < before_step]
        self.pending_notices = [(after, line) for after, line in self.pending_notices if after >= before_step]
        for line in due:
            self.console.print(visible(line), highlight=False, markup=False)

    def watch(self) -> None:
        with self.console.status("waiting for the first batch") as status:
            while True:
                self.show_progress(status)
                if self.check_alive():
                    self.show_progress(status)
                    self.print_notices(before_step=self.config.max_steps + 1)
                    return
                time.sleep(POLL_S)

    def print_evals(self) -> None:
        for line in self.evals.poll():
            self.console.print(visible(eval_summary_line(line)), highlight=False, markup=False)

    def promote_config(self) -> None:
        """A resume's changed config becomes config.json once the resumed run has trained a step."""
        if not self.owns_folder:
            return  # another node's part may race on the same shared folder
        if self.config_path == self.layout.pending_config_path and self.config_path.exists():
            os.replace(self.config_path, self.layout.config_path)

    def stop(self) -> None:
        """Stop every part; once: a later call does nothing (unless an interrupt cut the first one short)."""
        if self.stopped:
            return
        for part in (self.orchestrator, self.trainer, self.inference):
            if part is not None:
                part.stop(grace_s=10.0)
        self.stopped = True
        if self.metrics.poll():  # a step trained while the parts stopped counts, and makes a resume under way
            self.promote_config()

    def how_to_go_on(self) -> str:
        """The steps this run trained and the exact command that continues it (or why there is none)."""
        trained = len(self.metrics.rows)
        done = f"{trained} step{'s' if trained != 1 else ''} trained this run"
        steps = self.layout.checkpoint_steps()
        if steps:
            # a resume that never trained a step keeps its changed config in config.pending.json
            config = self.config_path if self.config_path.exists() else self.layout.config_path
            part = f" --part {self.part}" if self.part else ""
            part += f" --node-rank {self.node_rank}" if self.node_rank else ""
            return f"{done}; continue with: prime train {config} --resume-step {steps[-1]}{part}"
        every = f"no checkpoint was written yet (every {self.config.trainer.ckpt.interval} steps)"
        trained_here = [step for step in self.layout.weight_steps() if step > 0]
        if trained_here:
            return (f"{done}; {every}: to start over, run the same command with --force (it deletes the "
                    f"{len(trained_here)} trained step{'s' if len(trained_here) != 1 else ''} in "
                    f"{self.output_dir}), or train elsewhere with -o DIR")
        return f"{done}; {every}: start it again with the same command"


def launch(config: RLConfig, output_dir: Path, resume_step: int | None = None, force: bool = False,
           part: str | None = None, node_rank: int = 0) -> int:
    """The whole run here (part None), or one part of it (parts.py)."""
    from .parts import PartError, check_servers, serve_inference, wait_for_trainer, write_marker

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    output_dir = output_dir.resolve()
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        if part == "inference":
            return serve_inference(config, console)
        if part == "orchestrator" and not config.orchestrator.client.base_url:
            raise PartError("--part orchestrator samples from the servers in orchestrator.client.base_url; set it "
                            "to the inference parts' URLs (e.g. --set orchestrator.client.base_url='[\"http://node1:8400/v1\"]')")
        if part in (None, "orchestrator"):
            check_servers(config)
        if part == "orchestrator" or node_rank > 0:  # the trainer part of node 0 owns the folder
            config_path = wait_for_trainer(TrainingRunLayout(output_dir), console)
            return _run(Run(config, output_dir, resume_step, console, config_path, part, node_rank), console)
    except PartError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}")
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    try:
        prepared = run_dir.prepare(config, output_dir, resume_step, force)
    except run_dir.RunDirError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        return 2
    for note in prepared.notes:
        console.print(note, highlight=False, markup=False)
    try:
        if part == "trainer":
            write_marker(TrainingRunLayout(output_dir), prepared.config_path)
        return _run(Run(config, output_dir, resume_step, console, prepared.config_path, part), console)
    finally:
        prepared.lock.release()


def _run(run: Run, console: Console) -> int:
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        run.start()
        run.watch()
    except PartFailure as failure:
        run.stop()
        console.print(f"[bold red]{failure.part} failed:[/] {escape(visible(failure.message, multiline=True))}")
        console.print(run.how_to_go_on(), highlight=False)
        return 1
    except RunStopped as stopped:
        run.stop()
        console.print(f"[bold red]training stopped:[/] {escape(visible(stopped.cause, multiline=True))}", highlight=False)
        console.print(f"(details: {run.orchestrator.log_path}) {run.how_to_go_on()}", highlight=False)
        return 1
    except ServeError as exc:  # vLLM missing, bad model folder
        run.stop()
        console.print(f"[bold red]error:[/] {exc}")
        return 2
    except KeyboardInterrupt:
        console.print("stopping all parts")
        run.stop()
        console.print(run.how_to_go_on(), highlight=False)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        # every way out, an unexpected error included (the parent-death signal only helps when the launcher
        # dies); the branches above stopped the parts before printing, which makes this a no-op for them
        run.stop()
    if not run.reports:
        who = "orchestrator" if run.part == "orchestrator" else f"trainer node {run.node_rank}"
        console.print(f"[bold green]{who} done[/] (the run's steps and summary are in the terminal of the trainer "
                      f"part of node 0; metrics: {run.layout.metrics_path})")
        return 0
    return summarize(console, run, run.output_dir)


def summarize(console: Console, run: Run, output_dir: Path) -> int:
    """The closing lines; 1 when the run trained on no sample at all (it learned nothing)."""
    rows = run.metrics.rows
    layout = TrainingRunLayout(output_dir)
    last = max(layout.weight_steps(), default=0)
    if rows and all(row.get("effective_batch_size") == 0 for row in rows):
        console.print(f"[bold red]training failed:[/] none of the {len(rows)} steps of this run had a sample to "
                      f"train on (every rollout failed or was dropped; see {run.orchestrator.log_path})")
        return 1
    console.print(f"[bold green]training done[/]: {len(rows)} steps this run; reward per step: {reward_curve(rows)}")
    env_id = run.config.orchestrator.env[0].id
    adapter = layout.weights_dir(last)
    console.print(f"adapter: {adapter}  (PEFT; metrics: {layout.metrics_path})")
    console.print(f"evaluate it: prime serve --lora trained={adapter} --port 8001   then   "
                  f"prime eval run {env_id} -m trained -b http://127.0.0.1:8001/v1")
    return 0


def _interrupt(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt
