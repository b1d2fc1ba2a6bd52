"""`prime train CONFIG` with a [slurm] table, through the installed script: the sbatch script it writes
(checked by shellcheck), its submission, and the script run for real on this machine with `scontrol` and
`srun` stand-ins that place every "node" here (the parts as separate processes, the scripted server in
vLLM's place), so its wiring of URLs, ranks and the rendezvous is exercised end to end."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from prime_cli.serve.server import free_port
from tests.support.cli import prime_env

from . import slurm_cluster
from .train_runs import run_train, train_env, write_workspace

SHELLCHECK = Path(sys.executable).parent / "shellcheck"


def slurm_workspace(tmp_path: Path, model: Path, port: int, rdzv: int, max_steps: int = 2,
                    partition: str = "cpu") -> Path:
    extra = f"""
        [inference]
        port = {port}

        [deployment]
        type = "multi_node"
        num_train_nodes = 2
        num_infer_nodes = 1

        [slurm]
        job_name = "tiny-rl"
        partition = "{partition}"
        time = "00:30:00"
        rdzv_port = {rdzv}
        """
    return write_workspace(tmp_path, model, max_steps=max_steps, extra=extra)


def shims(folder: Path) -> Path:
    """scontrol (prints $SHIM_NODES one per line), srun (drops its own flags and runs the command here),
    sbatch (prints a job id)."""
    folder.mkdir(parents=True, exist_ok=True)
    scripts = {
        "scontrol": 'tr "," "\\n" <<< "$SHIM_NODES"\n',
        "srun": 'while [[ "$1" == --* ]]; do shift; done\nexec "$@"\n',
        "sbatch": 'echo "$@" > "$(dirname "$0")/sbatch.args"\necho 4242\n',
    }
    for name, body in scripts.items():
        (folder / name).write_text("#!/bin/bash\n" + body)
        (folder / name).chmod(0o755)
    return folder


def dying_node_shims(folder: Path, dead_node: str, ready_nodes: str) -> Path:
    """scontrol as in `shims`; srun runs nothing, its part stays up (a sleep) unless it is inference on
    `dead_node`, which ends at once; curl answers for the nodes in `ready_nodes` only; sleep is short."""
    real_sleep = shutil.which("sleep")
    scripts = {
        "scontrol": 'tr "," "\\n" <<< "$SHIM_NODES"\n',
        "srun": ('node=""\nwhile [[ "$1" == --* ]]; do [[ "$1" == --nodelist=* ]] && node="${1#--nodelist=}"; shift; done\n'
                 f'[[ "$*" == *"--part inference"* && "$node" == {dead_node} ]] && exit 3\nexec {real_sleep} 60\n'),
        "curl": f'for node in {ready_nodes}; do [[ "$*" == *"//$node:"* ]] && exit 0; done\nexit 7\n',
        "sleep": f"exec {real_sleep} 0.1\n",
    }
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in scripts.items():
        (folder / name).write_text("#!/bin/bash\n" + body)
        (folder / name).chmod(0o755)
    return folder


@pytest.mark.parametrize("ready_nodes", ["n1", ""], ids=["node-1-ready", "none-ready"])
def test_the_script_stops_when_inference_on_a_later_node_ends_before_it_is_ready(tmp_path, ready_nodes):
    from prime_cli.train.config import RLConfig
    from prime_lora import slurm

    config = RLConfig.model_validate({
        "orchestrator": {"batch_size": 4, "rollouts_per_example": 2, "env": [{"id": "reverse-text"}]},
        "deployment": {"type": "multi_node", "num_infer_nodes": 3, "num_train_nodes": 1},
        "slurm": {"job_name": "j", "project_dir": str(tmp_path)}})
    script = tmp_path / "train.sbatch"
    script.write_text(slurm.render(config, tmp_path / "config.json", script, None, slurm.TEMPLATE))
    bin_dir = dying_node_shims(tmp_path / "bin", dead_node="n2", ready_nodes=ready_nodes)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "SHIM_NODES": "n1,n2,n3,n4",
           "SLURM_JOB_NODELIST": "n[1-4]"}
    with open(tmp_path / "job.err", "w") as err:  # a file: the parts that stay up would hold a pipe open
        job = subprocess.Popen(["bash", str(script)], cwd=tmp_path, env=env, stderr=err, start_new_session=True)
    try:
        job.wait(timeout=20)  # before: polled node 1's part, alive, until SLURM's time limit
    except subprocess.TimeoutExpired:
        pass
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)  # the parts that stayed up
    stderr = (tmp_path / "job.err").read_text()
    assert job.wait() == 1, f"still polling after 20 s: {stderr}"
    assert stderr.strip().splitlines()[-1] == "the inference part on n2 ended before every server was ready"


def test_dry_run_writes_a_shellcheck_clean_script_and_prints_where_each_part_runs(tmp_path, model):
    config = slurm_workspace(tmp_path, model, free_port(), free_port())
    done = run_train([str(config), "--dry-run"], tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "outputs" / "rl" / "flaky-reward"
    script = out / "slurm" / "train.sbatch"
    assert "SLURM job 'tiny-rl': 3 nodes" in done.stdout
    assert "node 1: inference" in done.stdout and "node 2: trainer node-rank 0, orchestrator" in done.stdout
    assert "node 3: trainer node-rank 1" in done.stdout
    assert f"script: {script}" in done.stdout and "not submitted (--dry-run)" in done.stdout
    text = script.read_text()
    assert "#SBATCH --nodes=3" in text and "#SBATCH --partition=cpu" in text and "#SBATCH --time=00:30:00" in text
    checked = subprocess.run([str(SHELLCHECK), "--severity=style", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout
    job = json.loads((out / "slurm" / "config.json").read_text())
    assert job["slurm"] is None and job["output_dir"] == str(out)
    assert sorted(p.name for p in out.iterdir()) == ["slurm"]  # the dry run wrote its job, nothing else


def test_the_script_runs_every_part_and_trains_with_the_nodes_stood_in_for_here(tmp_path, model):
    config = slurm_workspace(tmp_path, model, free_port(), free_port(), max_steps=3)
    bin_dir = shims(tmp_path / "bin")
    assert run_train([str(config), "--dry-run"], tmp_path).returncode == 0
    out = tmp_path / "outputs" / "rl" / "flaky-reward"
    env = prime_env(train_env({"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                               "SHIM_NODES": "127.0.0.1,127.0.0.1,127.0.0.1", "SLURM_JOB_NODELIST": "n[1-3]"}))
    done = subprocess.run(["bash", str(out / "slurm" / "train.sbatch")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=420)
    assert done.returncode == 0, done.stderr[-4000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert "2 data-parallel ranks" in (out / "logs" / "trainer.log").read_text()
    assert (out / "weights" / "step_3" / "adapter_model.safetensors").exists()
    assert "inference ready: http://" in done.stderr and "training done" in done.stderr


def test_a_real_submission_calls_sbatch_and_names_the_job(tmp_path, model):
    config = slurm_workspace(tmp_path, model, free_port(), free_port())
    bin_dir = shims(tmp_path / "bin")
    done = run_train([str(config)], tmp_path, extra_env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    assert "submitted: job 4242" in done.stdout and "scancel 4242" in done.stdout
    script = tmp_path / "outputs" / "rl" / "flaky-reward" / "slurm" / "train.sbatch"
    assert (bin_dir / "sbatch.args").read_text().split() == ["--parsable", str(script)]


def test_without_sbatch_a_submission_is_one_line_naming_the_script(tmp_path, model):
    config = slurm_workspace(tmp_path, model, free_port(), free_port())
    done = run_train([str(config)], tmp_path, extra_env={"PATH": str(Path(sys.executable).parent)})
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "sbatch is not on this machine's PATH" in errors[0] and "train.sbatch" in errors[0]


def test_bad_templates_are_one_line_and_exit_2_and_write_nothing(tmp_path, model):
    config = slurm_workspace(tmp_path, model, free_port(), free_port())
    missing = run_train([str(config), "--dry-run", "--slurm-template", str(tmp_path / "nope.j2")], tmp_path)
    assert missing.returncode == 2 and "--slurm-template" in missing.stderr and "no such file" in missing.stderr
    broken = tmp_path / "broken.j2"
    broken.write_text("#!/bin/bash\n{{ no_such_variable }}\n")
    bad = run_train([str(config), "--dry-run", "--slurm-template", str(broken)], tmp_path)
    assert bad.returncode == 2
    errors = [line for line in bad.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and str(broken) in errors[0] and "no_such_variable" in errors[0], bad.stderr
    assert not (tmp_path / "outputs" / "rl" / "flaky-reward" / "slurm").exists()
    plain = write_workspace(tmp_path / "plain", model)
    (tmp_path / "plain" / "t.j2").write_text("x")
    stray = run_train([str(plain), "--slurm-template", str(tmp_path / "plain" / "t.j2")], tmp_path / "plain")
    assert stray.returncode == 2 and "[slurm] table" in stray.stderr


def test_a_user_template_is_rendered_with_the_same_variables(tmp_path, model):
    config = slurm_workspace(tmp_path, model, free_port(), free_port())
    mine = tmp_path / "mine.j2"
    mine.write_text(textwrap.dedent("""\
        #!/bin/bash
        #SBATCH --nodes={{ num_nodes }}
        # {{ job_name }} {{ num_infer_nodes }} {{ num_train_nodes }} {{ rdzv_port }}
        echo {{ config_path | shell_quote }}
        """))
    done = run_train([str(config), "--dry-run", "--slurm-template", str(mine)], tmp_path)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "outputs" / "rl" / "flaky-reward" / "slurm" / "train.sbatch").read_text()
    assert "#SBATCH --nodes=3" in text and "# tiny-rl 1 2" in text


@pytest.mark.slurm
def test_a_three_node_slurm_cluster_on_this_machine_runs_the_submitted_job_to_the_end(tmp_path, model):
    if reason := slurm_cluster.unavailable():
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="slurm-"))  # short: munge's socket path must fit a unix socket name
    cluster = slurm_cluster.LocalSlurm(root).start()
    try:
        config = slurm_workspace(tmp_path, model, free_port(), free_port(), max_steps=3, partition="debug")
        done = run_train([str(config)], tmp_path, extra_env={"SLURM_CONF": str(cluster.conf)})
        assert done.returncode == 0, done.stderr
        job_id = re.search(r"submitted: job (\d+)", done.stdout).group(1)
        deadline = time.monotonic() + 300
        while (state := cluster.job_state(job_id)) in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
            assert time.monotonic() < deadline, f"job {job_id} still {state}"
            time.sleep(2)
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    out = tmp_path / "outputs" / "rl" / "flaky-reward"
    log = (out / "slurm" / f"slurm-{job_id}.out").read_text()
    assert state == "COMPLETED", log[-3000:]
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]
    assert "2 data-parallel ranks" in (out / "logs" / "trainer.log").read_text()
    assert "inference ready" in log and "training done: 3 steps" in log and "orchestrator done" in log
