"""Ctrl-C on a GEPA search, as on an eval: the first press launches nothing new, lets the proposals in flight
finish and commit, and leaves the run cancelled and resumable (a resume then makes the choices of an
uninterrupted run); the second stops at once. Through the real CLI (a subprocess, scripted models on a
loopback server whose reflection replies are held until the signal has landed), and in process for the
test passes."""

import asyncio
import io
import json
import os
import signal
import threading
import time

import pytest

from prime_cli.gepa.api import run_search
from prime_cli.gepa.engine import GepaEngine
from tests.evals.cli_support import popen_prime, run_prime
from tests.gepa import support
from tests.support.scripted_server import ScriptedOpenAIServer

pytestmark = pytest.mark.filterwarnings("ignore::prime_cli.envs.loader.LocalEnvironmentWarning")

WAIT_S = 60


class HeldReflections:
    """Scripted replies; while `held`, a reflection request waits for `release` (its arrival is `asked`)."""

    def __init__(self, held: bool = True) -> None:
        self.asked, self.release = threading.Event(), threading.Event()
        if not held:
            self.release.set()
        self.reflections = 0

    def __call__(self, body):
        messages = body["messages"]
        if body["model"] != "reflector":
            return support.student_reply(messages, None, None)
        self.reflections += 1
        self.asked.set()
        assert self.release.wait(WAIT_S)
        return support.reflector_reply(messages, None, None)


class Lines:
    """A process's stdout lines, read as they come (so that a test can wait for one)."""

    def __init__(self, stream) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=lambda: self.lines.extend(stream), daemon=True)
        self._thread.start()

    def wait_for(self, text: str) -> str:
        deadline = time.time() + WAIT_S
        while time.time() < deadline:
            found = next((line for line in list(self.lines) if text in line), None)
            if found is not None:
                return found
            time.sleep(0.02)
        raise AssertionError(f"no line with {text!r} in {self.lines}")

    def text(self) -> str:
        self._thread.join(WAIT_S)
        return "".join(self.lines)


def gepa_args(tmp_path, url, run_dir, *extra):
    support.write_toy_env(tmp_path)
    return ["gepa", "run", "toy-gepa", "-m", "student", "-M", "reflector", "-b", url, "-n", "20", "-N", "10",
            "-B", "150", "-P", "2", "-c", "4", "--seed", "3", "--plain", "-o", str(run_dir), *extra]


def without_time(rows):
    return [{k: v for k, v in row.items() if k != "time_s"} for row in rows]


@pytest.mark.parametrize("speculate", [0, 2])
def test_first_ctrl_c_commits_what_is_in_flight_and_a_resume_makes_the_uninterrupted_choices(tmp_path, speculate):
    run_dir, reference = tmp_path / "run", tmp_path / "reference"
    extra = ["--speculate", str(speculate)] if speculate else []
    held = HeldReflections()
    with ScriptedOpenAIServer(held) as server:
        proc = popen_prime(gepa_args(tmp_path, server.url, run_dir, *extra), tmp_path)
        out = Lines(proc.stdout)
        assert held.asked.wait(WAIT_S), proc.stderr.read() if proc.poll() is not None else "no reflection request"
        proc.send_signal(signal.SIGINT)
        warning = out.wait_for("cancelling")
        held.release.set()
        proc.wait(WAIT_S)
        err = proc.stderr.read()
        shown = out.text()
        reflections_before_resume = held.reflections
        assert proc.returncode == 1, err
        meta = json.loads((run_dir / "metadata.json").read_text())
        assert meta["status"] == "cancelled"
        assert "proposal(s) in flight to finish and commit (Ctrl-C again to stop now)" in warning
        assert f"-R {run_dir}" in shown
        iterations = support.lines(run_dir / "iterations.jsonl")
        # the proposals in flight at the signal (the first two: -P 2) committed, and none was launched after it
        assert [it["iteration"] for it in iterations] == [1, 2]
        if not speculate:  # (prefetches made reflection calls of their own before the signal)
            assert reflections_before_resume == sum(1 for it in iterations if it["reason"] != "minibatch already perfect")
        resumed = run_prime(["gepa", "run", "-R", str(run_dir)], tmp_path)
        assert resumed.returncode == 0, resumed.stderr
        whole = run_prime(gepa_args(tmp_path, server.url, reference, *extra), tmp_path)
        assert whole.returncode == 0, whole.stderr
    assert json.loads((run_dir / "metadata.json").read_text())["status"] == "completed"
    for name in ("iterations.jsonl", "candidates.jsonl"):
        assert without_time(support.lines(run_dir / name)) == without_time(support.lines(reference / name)), name
    assert (run_dir / "best_prompt.txt").read_text() == (reference / "best_prompt.txt").read_text()


def test_second_ctrl_c_stops_at_once_and_the_run_resumes(tmp_path):
    run_dir = tmp_path / "run"
    held = HeldReflections()
    with ScriptedOpenAIServer(held) as server:
        proc = popen_prime(gepa_args(tmp_path, server.url, run_dir), tmp_path)
        out = Lines(proc.stdout)
        assert held.asked.wait(WAIT_S)
        proc.send_signal(signal.SIGINT)
        out.wait_for("cancelling")
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(WAIT_S)  # while the reflections are still held: nothing in flight was waited for
        finally:
            held.release.set()
        assert proc.returncode == 1, proc.stderr.read()
        assert json.loads((run_dir / "metadata.json").read_text())["status"] == "cancelled"
        assert f"-R {run_dir}" in out.text()
        resumed = run_prime(["gepa", "run", "-R", str(run_dir)], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((run_dir / "metadata.json").read_text())["status"] == "completed"


def interrupted_in_test_passes(monkeypatch, presses: int):
    """Ctrl-C `presses` times as the test passes begin (SIGINT to this process: run_search's handler takes it)."""
    score_test = GepaEngine._score_test

    async def pressed(self, outcome):
        for _ in range(presses):
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.sleep(0.05)  # the loop runs the handler
        await score_test(self, outcome)

    monkeypatch.setattr(GepaEngine, "_score_test", pressed)


def test_first_ctrl_c_in_the_test_passes_lets_them_finish_and_cancels(workdir, monkeypatch):
    interrupted_in_test_passes(monkeypatch, 1)
    stream = io.StringIO()
    outcome, run_dir = asyncio.run(run_search(support.toy_config(workdir / "run", num_test=10), False, stream,
                                              pools=(support.student(), support.reflector())))
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert outcome.status == meta["status"] == "cancelled"
    assert meta["seed_test_score"] is not None and meta["best_test_score"] is not None
    assert "cancelling: waiting for the test passes to finish (Ctrl-C again to stop now)" in stream.getvalue()


def test_second_ctrl_c_in_the_test_passes_leaves_a_cancelled_run(workdir, monkeypatch):
    interrupted_in_test_passes(monkeypatch, 2)
    outcome, run_dir = asyncio.run(run_search(support.toy_config(workdir / "run", num_test=10), False, io.StringIO(),
                                              pools=(support.student(), support.reflector())))
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert outcome.status == meta["status"] == "cancelled"
    assert meta["best_test_score"] is None
