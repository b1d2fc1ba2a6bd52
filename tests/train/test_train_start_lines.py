"""`prime train`'s first lines, read through a pipe (where no spinner shows): what it starts, then a line
while vLLM is still starting, then "vLLM ready". The scripted server stands in for vLLM (train_runs.py),
started behind a `sleep` so that it is slow to come up."""

from __future__ import annotations

import os
from pathlib import Path

from .train_runs import FAKE_VLLM, REPO, run_train, write_workspace

SLOW_START = f'''
exec(compile(open({str(FAKE_VLLM / "sitecustomize.py")!r}).read(), "fake_vllm_sitecustomize", "exec"))

if __import__("os").environ.get("PRIME_TEST_FAKE_VLLM") == "1":
    from prime_cli.serve import server

    _scripted = server.VllmServer.launch_spec

    def _slow_launch_spec(self):
        command, env = _scripted(self)
        return ["sh", "-c", 'sleep 3; exec "$@"', "sh", *command], env

    server.VllmServer.launch_spec = _slow_launch_spec
'''


def test_the_start_says_what_starts_and_that_vllm_is_still_starting(tmp_path, model):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SLOW_START)
    config = write_workspace(tmp_path, model, max_steps=1)
    path = os.pathsep.join([str(site), str(REPO), str(REPO / "plugins" / "prime-lora")])
    done = run_train([str(config)], tmp_path, extra_env={"PYTHONPATH": path, "PRIME_TRAIN_WAIT_NOTICE_S": "0.5"})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    out = Path(tmp_path / "outputs" / "rl" / "flaky-reward")
    start = next(i for i, line in enumerate(lines) if line.startswith("starting vLLM"))
    assert str(model) in lines[start] and str(out / "logs" / "inference.log") in lines[start]
    assert "the trainer" in lines[start] and str(out / "logs" / "trainer.log") in lines[start]
    ready = next(i for i, line in enumerate(lines) if line.startswith("vLLM ready"))
    waiting = [line for line in lines[start + 1:ready] if line.startswith("waiting for vLLM to start")]
    assert waiting and all(" s)" in line for line in waiting), lines[start:ready + 1]
