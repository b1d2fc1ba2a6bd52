"""`prime train CONFIG` with a [slurm] table: the run as one SLURM job.

The job's config (the run's, without [slurm]) and an sbatch script rendered from a Jinja2 template
(templates/train.sbatch.j2, or the user's: `--slurm-template` / slurm.template_path) go to
`OUTPUT_DIR/slurm/`; the script places the parts on the allocated nodes (inference nodes first, then
trainer nodes, the orchestrator beside trainer node 0), wires the inference URLs and the rendezvous
endpoint with `--set`, and runs `prime train CONFIG --part ...` on each. `--dry-run` stops there.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from prime_cli.train.plugin_api import RLConfig

TEMPLATE = Path(__file__).parent / "templates" / "train.sbatch.j2"


class SlurmError(Exception):
    """The job cannot be written or submitted (one line for the user)."""


@dataclass
class SlurmJob:
    script: Path
    config: Path
    placement: list[str]  # one line per node: which part runs there


def placement(config: RLConfig) -> list[str]:
    deployment = config.deployment
    if deployment.type != "multi_node":
        return ["node 1: every part (inference, orchestrator, trainer), as `prime train` runs them on one machine"]
    lines = [f"node {i + 1}: inference (vLLM on port {config.inference.port})" for i in range(deployment.num_infer_nodes)]
    first = deployment.num_infer_nodes + 1
    for rank in range(deployment.num_train_nodes):
        extra = f", orchestrator; rendezvous on port {config.slurm.rdzv_port}" if rank == 0 else ""
        lines.append(f"node {first + rank}: trainer node-rank {rank}{extra}")
    return lines


def prime_command() -> str:
    found = Path(sys.executable).parent / "prime"
    return str(found) if found.exists() else (shutil.which("prime") or "prime")


def render(config: RLConfig, job_config: Path, script: Path, resume_step: int | None, template: Path) -> str:
    import jinja2

    try:
        source = template.read_text()
    except OSError as exc:
        raise SlurmError(f"the SLURM template {template} cannot be read ({exc.strerror}); fix --slurm-template or "
                         "slurm.template_path, or leave both out for prime-lora's own") from None
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)  # noqa: S701 - a shell script
    env.filters["shell_quote"] = lambda value: shlex.quote(str(value))
    slurm, deployment = config.slurm, config.deployment
    multi = deployment.type == "multi_node"
    try:
        return env.from_string(source).render(
            job_name=slurm.job_name, partition=slurm.partition, account=slurm.account, time=slurm.time,
            nodelist=slurm.nodelist, exclude=slurm.exclude, pre_run_command=slurm.pre_run_command,
            project_dir=slurm.project_dir or str(Path.cwd()), rdzv_port=slurm.rdzv_port,
            num_nodes=deployment.num_infer_nodes + deployment.num_train_nodes if multi else 1,
            num_infer_nodes=deployment.num_infer_nodes, num_train_nodes=deployment.num_train_nodes,
            gpus_per_node=deployment.gpus_per_node, multi_node=multi, inference_port=config.inference.port,
            output_dir=config.output_dir, log_dir=str(script.parent), script_path=str(script),
            config_path=str(job_config), prime=prime_command(),
            resume_args="" if resume_step is None else f"--resume-step {resume_step}")
    except jinja2.TemplateError as exc:
        raise SlurmError(f"the SLURM template {template} does not render: {exc}") from None


def write_job(config: RLConfig, output_dir: Path, resume_step: int | None, template: Path | None = None) -> SlurmJob:
    """The job's config and script under OUTPUT_DIR/slurm/ (created; nothing else is touched)."""
    template = template or (Path(config.slurm.template_path) if config.slurm.template_path else TEMPLATE)
    folder = output_dir / "slurm"
    job_config, script = folder / "config.json", folder / "train.sbatch"
    text = render(config, job_config, script, resume_step, template)  # a bad template writes nothing
    folder.mkdir(parents=True, exist_ok=True)
    # the parts read this config: the run's, with its folder made absolute and without [slurm] (no resubmitting)
    job_config.write_text(config.model_copy(update={"slurm": None, "output_dir": str(output_dir)}).model_dump_json(indent=2))
    script.write_text(text)
    script.chmod(0o755)
    return SlurmJob(script, job_config, placement(config))


def submit(job: SlurmJob) -> str:
    """sbatch the script; the job id."""
    if shutil.which("sbatch") is None:
        raise SlurmError(f"sbatch is not on this machine's PATH: submit {job.script} from a SLURM login node "
                         "(`sbatch SCRIPT`), or write it only with --dry-run")
    done = subprocess.run(["sbatch", "--parsable", str(job.script)], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise SlurmError(f"sbatch refused {job.script}: {' '.join(done.stderr.split())[:500]}")
    match = re.match(r"\s*(\d+)", done.stdout)
    if match is None:
        raise SlurmError(f"sbatch answered without a job id: {done.stdout.strip()[:200]}")
    return match.group(1)


def run_slurm(config: RLConfig, output_dir: Path, resume_step: int | None, dry_run: bool,
              template: Path | None, echo) -> int:
    """Write the job (and submit it unless `dry_run`), saying where each part runs. 2: bad input."""
    from .run_dir import RunDirError, check

    try:
        check(config, output_dir.resolve(), resume_step)
    except RunDirError as exc:
        echo(f"error: {exc}", err=True)
        return 2
    try:
        job = write_job(config, output_dir.resolve(), resume_step, template)
        echo(f"SLURM job {config.slurm.job_name!r}: {len(job.placement)} node{'s' if len(job.placement) != 1 else ''}")
        for line in job.placement:
            echo(f"  {line}")
        echo(f"script: {job.script}  (the parts' config: {job.config})")
        if dry_run:
            echo(f"not submitted (--dry-run); submit it with: sbatch {job.script}")
            return 0
        job_id = submit(job)
    except SlurmError as exc:
        echo(f"error: {exc}", err=True)
        return 2
    echo(f"submitted: job {job_id}; output: {job.script.parent}/slurm-{job_id}.out; follow it with "
         f"`squeue -j {job_id}`, stop it with `scancel {job_id}`")
    return 0
