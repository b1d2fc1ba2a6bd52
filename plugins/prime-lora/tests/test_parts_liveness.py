"""Parts started apart notice each other (heartbeats read on the reader's clock), say what they wait for,
and stop on SIGTERM and SIGHUP as on Ctrl-C. In-process and fast; the parts as processes, killed in turn,
are in tests/train/test_train_part_deaths.py."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prime_cli.train.plugin_api import TrainingRunLayout
from prime_lora.liveness import Heartbeat, Liveness, PartGone, Watch, seconds_from_env
from prime_lora.stops import Stopped, exit_code, stop_name, stop_signals
from prime_lora.waits import WaitNotice, batch_awaited, weights_awaited


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def wait_for_beat(path: Path, after: int) -> None:
    import json

    deadline = time.monotonic() + 5
    while json.loads(path.read_text())["beat"] <= after:
        assert time.monotonic() < deadline, "the heartbeat thread did not beat"
        time.sleep(0.01)


def test_a_part_that_stops_beating_is_gone_after_the_bound_on_the_readers_clock(tmp_path):
    path, clock = tmp_path / "trainer.json", Clock()
    beat = Heartbeat(path, "run-1", every_s=0.02)
    beat.start()
    watch = Watch(path, "trainer", "run-1", timeout_s=10, required=True, clock=clock)
    watch.check()
    clock.now = 9.0
    wait_for_beat(path, 2)
    watch.check()  # it beat since: the silence counts from 9 s
    beat.stop_event.set()  # killed: no last word
    beat.thread.join()
    wait_for_beat(path, 0)
    watch.check()
    clock.now = 18.0
    watch.check()
    clock.now = 19.5
    with pytest.raises(PartGone) as gone:
        watch.check()
    assert gone.value.label == "the trainer part (node 0)"
    assert "no heartbeat for 10 s" in gone.value.why and f"PID {os.getpid()}" in gone.value.why


def test_a_part_that_ended_says_how_and_the_others_read_it_at_once(tmp_path):
    stopped, done = tmp_path / "orchestrator.json", tmp_path / "trainer_node1.json"
    for path, state, why in ((stopped, "stopped", "the orchestrator exited (code 1)"), (done, "done", "")):
        beat = Heartbeat(path, "run-1", every_s=60)
        beat.start()
        beat.end(state, why)
        beat.end("stopped", "a second end changes nothing")
    with pytest.raises(PartGone) as gone:
        Watch(stopped, "orchestrator", "run-1", timeout_s=60, required=False).check()
    assert gone.value.label == "the orchestrator part"
    assert gone.value.why == "it stopped (the orchestrator exited (code 1))"
    clock = Clock()
    finished = Watch(done, "trainer_node1", "run-1", timeout_s=1, required=False, clock=clock)
    finished.check()
    clock.now = 100.0
    finished.check()  # done is not gone, however long ago
    assert finished.describe() == "the trainer part of node 1 has finished"


def test_an_earlier_sessions_heartbeat_is_not_this_runs(tmp_path):
    path, clock = tmp_path / "orchestrator.json", Clock()
    old = Heartbeat(path, "run-0", every_s=60)
    old.start()
    old.end("stopped", "an earlier run")
    later = Watch(path, "orchestrator", "run-1", timeout_s=5, required=False, clock=clock)
    clock.now = 100.0
    later.check()  # not started in this session: nothing to miss yet
    assert later.describe() == "the orchestrator part has not started yet"
    required = Watch(path, "trainer", "run-1", timeout_s=5, required=True, clock=clock)
    clock.now = 106.0
    with pytest.raises(PartGone, match="no heartbeat for 6 s"):
        required.check()


def test_the_bound_is_never_shorter_than_three_of_the_writers_beats(tmp_path):
    path, clock = tmp_path / "trainer.json", Clock()
    beat = Heartbeat(path, "run-1", every_s=20)  # a node with a longer bound than the reader's
    beat.write("running")
    watch = Watch(path, "trainer", "run-1", timeout_s=5, required=True, clock=clock)
    watch.check()
    clock.now = 59.0
    watch.check()
    clock.now = 61.0
    with pytest.raises(PartGone):
        watch.check()


def test_node_0_watches_the_parts_that_need_it_and_they_watch_node_0(tmp_path):
    layout = TrainingRunLayout(tmp_path)
    node0 = Liveness.for_part(layout, "trainer", 0, 3, "run-1", timeout_s=30)
    assert [(w.name, w.seen) for w in node0.watches] == [("orchestrator", False), ("trainer_node1", False),
                                                         ("trainer_node2", False)]
    assert node0.heartbeat.path == tmp_path / "heartbeats" / "trainer.json" and node0.heartbeat.every_s == 5
    for part, rank, name in (("orchestrator", 0, "orchestrator"), ("trainer", 2, "trainer_node2")):
        liveness = Liveness.for_part(layout, part, rank, 3, "run-1", timeout_s=30)
        assert liveness.heartbeat.path.name == f"{name}.json"
        assert [(w.name, w.seen) for w in liveness.watches] == [("trainer", True)]


@pytest.mark.parametrize(("raw", "expected"), [("", 30.0), ("2.5", 2.5)])
def test_bounds_from_the_environment(monkeypatch, raw, expected):
    monkeypatch.setenv("PRIME_TRAIN_PART_TIMEOUT_S", raw)
    assert seconds_from_env("PRIME_TRAIN_PART_TIMEOUT_S", 30.0) == expected


@pytest.mark.parametrize("raw", ["abc", "0", "-3", "inf", "nan"])
def test_a_bad_bound_is_one_line_naming_the_variable(monkeypatch, raw):
    monkeypatch.setenv("PRIME_TRAIN_PART_TIMEOUT_S", raw)
    with pytest.raises(ValueError, match=r"^PRIME_TRAIN_PART_TIMEOUT_S='.*': give a number of seconds above 0"):
        seconds_from_env("PRIME_TRAIN_PART_TIMEOUT_S", 30.0)


def test_a_wait_is_said_every_period_with_since_when_and_how_the_other_part_is():
    said, clock = [], Clock()
    notice = WaitNotice(30, said.append, clock=clock)
    notice.update("the orchestrator's batch for step 3", lambda: "the orchestrator part has not started yet")
    clock.now = 29.0
    notice.update("the orchestrator's batch for step 3")
    assert said == []
    for clock.now in (30.0, 31.0, 59.0, 60.5):
        notice.update("the orchestrator's batch for step 3", lambda: "the orchestrator part is running")
    assert len(said) == 2
    assert said[0].startswith("waiting for the orchestrator's batch for step 3 since ")
    assert said[0].endswith("(30 s); the orchestrator part is running") and "(60 s)" in said[1]
    notice.update(None)  # the batch came
    notice.update("the orchestrator's batch for step 4")
    clock.now = 89.0
    notice.update("the orchestrator's batch for step 4")
    assert len(said) == 2  # a new wait counts from its own start


def test_what_each_part_waits_for_is_read_from_the_run_folder(tmp_path):
    layout = TrainingRunLayout(tmp_path)
    assert batch_awaited(layout, 1, 3) == f"the orchestrator's batch for step 1 ({layout.batch_path(1)})"
    assert weights_awaited(layout, 0, 3, 1) == f"the trainer's weights of step 0 ({layout.weights_dir(0)}) to sample batch 1"
    layout.weights_dir(0).mkdir(parents=True)
    assert weights_awaited(layout, 0, 3, 1) is None  # batch 1 and 2 may be sampled with step 0's weights
    for step in (1, 2):
        layout.rollouts_dir(step).mkdir(parents=True)
        layout.batch_path(step).write_text("{}\n")
    assert batch_awaited(layout, 1, 3) is None and batch_awaited(layout, 4, 3) is None
    assert weights_awaited(layout, 0, 3, 1) == f"the trainer's weights of step 1 ({layout.weights_dir(1)}) to sample batch 3"
    assert weights_awaited(layout, 0, 2, 1) is None  # every batch written


@pytest.mark.parametrize(("signum", "code", "name"), [(signal.SIGTERM, 143, "SIGTERM"),
                                                      (signal.SIGHUP, 129, "SIGHUP (the terminal closed)")])
def test_sigterm_and_sighup_stop_like_ctrl_c_with_their_exit_codes(signum, code, name):
    outer = signal.signal(signum, signal.SIG_DFL)  # as in a terminal, not ignored (the suite may run under nohup)
    try:
        before = signal.getsignal(signum)
        with pytest.raises(KeyboardInterrupt) as stop, stop_signals():
            os.kill(os.getpid(), signum)
            time.sleep(5)
        assert isinstance(stop.value, Stopped) and exit_code(stop.value) == code and stop_name(stop.value) == name
        assert signal.getsignal(signum) is before
    finally:
        signal.signal(signum, outer)
    assert exit_code(KeyboardInterrupt()) == 130 and stop_name(KeyboardInterrupt()) == "Ctrl-C"


def test_an_ignored_sighup_stays_ignored(monkeypatch):
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nohup prime train ...
    try:
        with stop_signals():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)
    finally:
        signal.signal(signal.SIGHUP, previous)


CLOSED_TERMINAL = """
import sys, time
from prime_lora.stops import exit_code, stop_signals
try:
    with stop_signals():
        print("ready", flush=True)
        time.sleep(30)
except KeyboardInterrupt as stop:
    for _ in range(3):
        print("stopping all parts; continue with: ...", file=sys.stderr, flush=True)
    sys.exit(exit_code(stop))
"""


def in_a_terminal() -> None:
    """A child's preexec: the pty on stdin as its controlling terminal, and SIGHUP not ignored (as a shell
    starts a command, though the suite may run under nohup)."""
    import fcntl
    import termios

    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def test_a_closed_terminal_stops_with_129_though_nothing_can_be_written_there_any_more():
    master, slave = pty.openpty()
    child = subprocess.Popen([sys.executable, "-c", CLOSED_TERMINAL], stdin=slave, stdout=slave, stderr=slave,
                             start_new_session=True, preexec_fn=in_a_terminal)
    os.close(slave)
    try:
        assert b"ready" in os.read(master, 100)
    finally:
        os.close(master)  # the terminal closes: the kernel sends SIGHUP
    assert child.wait(timeout=20) == 129
