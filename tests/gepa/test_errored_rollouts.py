"""GEPA never scores an errored rollout 0: planted errors, through `prime gepa run` against the scripted
server (student calls that get a 500 on every try) and in process (a student that fails on validation rows).

The toy student answers a row right only when the system prompt names its kind (tests/gepa/support.py).
Planted here: every student call on a row whose item number ends in 0, 1 or 2 fails (30% of the rows, for
every prompt), and every student call of a prompt containing BREAK fails.
"""

from __future__ import annotations

import asyncio
import io
import json
import re

import pytest

from prime_cli.envs.errors import ModelError
from prime_cli.gepa.api import run_search
from prime_cli.gepa.config import build_config
from tests.evals.cli_support import run_prime
from tests.gepa import support
from tests.support.scripted_server import ScriptedOpenAIServer

pytestmark = pytest.mark.filterwarnings("ignore::prime_cli.envs.loader.LocalEnvironmentWarning")


def item(question: str) -> int:
    return int(re.search(r"item (\d+)", question).group(1))


def planted(question: str) -> bool:
    return item(question) % 10 < 3


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class Server:
    """Student calls fail (HTTP 500 on every try) on planted rows and for prompts with BREAK; the reflector
    first proposes a prompt with BREAK in it, then behaves."""

    def __init__(self) -> None:
        self.reflections: list[str] = []

    def reply(self, body):
        messages = body["messages"]
        if body["model"] == "reflector":
            self.reflections.append(messages[-1]["content"])
            reply = support.reflector_reply(messages, None, None)
            return reply.replace("```\n", "```\nBREAK everything.\n", 1) if len(self.reflections) == 1 else reply
        return support.student_reply(messages, None, None)

    def fault(self, body):
        if body["model"] == "reflector":
            return None
        messages = body["messages"]
        broken = "BREAK" in support.system_text(messages) or planted(messages[-1]["content"])
        return "500" if broken else None


def test_planted_errors_are_counted_left_out_and_shown_to_the_reflection(tmp_path):
    script = Server()
    support.write_toy_env(tmp_path)
    with ScriptedOpenAIServer(script.reply, fault_for=script.fault) as server:
        done = run_prime(["gepa", "run", "toy-gepa", "-m", "student", "-M", "reflector", "-b", server.url,
                          "-n", "20", "-N", "10", "-B", "120", "--max-retries", "1", "-o", str(tmp_path / "run"),
                          "--plain"], tmp_path)
        student_bodies = [r["json"] for r in server.requests_to("/v1/chat/completions") if r["json"]["model"] == "student"]
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "run"
    meta = json.loads((run_dir / "metadata.json").read_text())
    candidates, iterations = lines(run_dir / "candidates.jsonl"), lines(run_dir / "iterations.jsonl")
    r = meta["config"]["rollouts_per_example"]
    # no 0 entered for an errored row: the planted validation rows have no score, the others do
    rows_planted = [score is None for score in candidates[0]["val_scores"]]
    assert 0 < sum(rows_planted) < len(rows_planted)
    for cand in candidates:
        assert [s is None for s in cand["val_scores"]] == rows_planted
        scored = [s for s in cand["val_scores"] if s is not None]
        assert cand["val_mean"] == pytest.approx(sum(scored) / len(scored))
        assert cand["val_errored"] == r * sum(rows_planted)
    for it in iterations:  # a minibatch row whose rollouts errored has no score: it is counted instead
        assert it["parent_minibatch_errored"] == r * sum(s is None for s in it["parent_minibatch_scores"])
        assert it["child_minibatch_errored"] == r * sum(s is None for s in it["child_minibatch_scores"])
    assert any(it["parent_minibatch_errored"] for it in iterations)

    # the candidate with BREAK errored on every minibatch rollout: rejected, saying why
    broken = [it for it in iterations if it["child_prompt"] and "BREAK" in it["child_prompt"]]
    assert len(broken) == 1 and not broken[0]["accepted"]
    assert broken[0]["child_minibatch_scores"] == [None] * len(broken[0]["minibatch_rows"])
    assert broken[0]["reason"].startswith(f"errored on {len(broken[0]['minibatch_rows'])} of "
                                          f"{len(broken[0]['minibatch_rows'])} minibatch rollouts (more than half; "
                                          "the parent on ")
    assert not any("BREAK" in c["system_prompt"] for c in candidates)
    assert any(it["accepted"] for it in iterations)  # the search went on and found better prompts
    assert "rejected: errored on" in done.stdout
    assert f"best so far (seed) {candidates[0]['val_mean']:.4f} ({r * sum(rows_planted)} errored, left out)" in done.stdout

    # metadata counts what was left out; the summary says it
    errored = meta["errored_rollouts"]
    student_errors = sum(1 for b in student_bodies if "BREAK" in support.system_text(b["messages"])
                         or planted(b["messages"][-1]["content"]))
    assert errored["left_out"] > 0 and errored["left_out"] == errored["train"] + errored["val"] + errored["test"]
    assert errored["rollouts"] == meta["total_metric_calls"] + meta["test_metric_calls"]
    assert student_errors == 2 * errored["left_out"]  # each errored rollout was tried twice (--max-retries 1)
    assert errored["val"] == sum(c["val_errored"] for c in candidates)
    assert f"errored rollouts left out (counted, never scored 0): {errored['left_out']} of {errored['rollouts']} " \
           f"(train {errored['train']}, val {errored['val']})" in done.stdout

    # the reflection read the errors as feedback, not as a reward of 0
    with_errors = [text for text in script.reflections if "### Reward: none" in text]
    assert with_errors and all("HTTP 500" in text or "500" in text for text in with_errors)
    assert any("### Error: ModelError:" in text for text in with_errors)
    examples = [block for text in script.reflections for block in text.split("## Example ")[1:]]
    errored_examples = [block for block in examples if "### Error" in block]
    assert errored_examples and all("### Reward: none" in block and "### Reward: 0" not in block
                                    for block in errored_examples)


def test_a_child_that_errors_on_most_validation_rows_is_not_accepted(tmp_path, monkeypatch):
    support.write_toy_env(tmp_path)
    monkeypatch.chdir(tmp_path)

    def is_val(question: str) -> bool:  # validation rows come from the eval dataset: kind offset 3
        number = item(question)
        return question.startswith(f"kind:{support.KINDS[(number * 7 + 3) % len(support.KINDS)]} ")

    def student(messages, tools, sampling_args):
        if "VALBREAK" in support.system_text(messages) and is_val(messages[-1]["content"]):
            return ModelError("student at http://x failed after 2 attempts; last error: HTTP 500")
        return support.student_reply(messages, tools, sampling_args)

    calls = []

    def reflector(messages, tools, sampling_args):
        calls.append(1)
        reply = support.reflector_reply(messages, tools, sampling_args)
        return reply.replace("```\n", "```\nVALBREAK\n", 1) if len(calls) == 1 else reply

    cfg = build_config("test", env_id="toy-gepa", model="student", reflection_model="reflector", max_calls=120,
                       num_train=20, num_val=10, minibatch_size=3, run_dir=str(tmp_path / "run"), display="plain")
    outcome, run_dir = asyncio.run(run_search(cfg, False, io.StringIO(),
                                              pools=(support.Pool(support.ScriptedClient(student), "student"),
                                                     support.reflector(reflector))))
    first = lines(run_dir / "iterations.jsonl")[0]
    assert "VALBREAK" in first["child_prompt"] and not first["accepted"] and first["child_idx"] is None
    assert sum(first["child_minibatch_scores"]) > sum(first["parent_minibatch_scores"])  # it won the minibatch
    assert first["reason"] == "better on minibatch, but errored on 10 of 10 validation rollouts (more than half; " \
                              "the parent on 0): not judged on the other 0"
    assert not any("VALBREAK" in c.prompt for c in outcome.state.candidates)
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["errored_rollouts"]["val"] == 10 and meta["errored_rollouts"]["left_out"] == 10


def test_rows_that_fail_for_every_prompt_are_left_out_not_held_against_the_child(tmp_path, monkeypatch):
    """70% of the rows fail for any prompt (the rows' fault, not the prompt's): a child is judged on the rows
    left, since its parent errored on the same ones, and the search still improves the prompt."""
    support.write_toy_env(tmp_path)
    monkeypatch.chdir(tmp_path)

    def student(messages, tools, sampling_args):
        if item(messages[-1]["content"]) % 10 < 7:
            return ModelError("student at http://x failed after 2 attempts; last error: HTTP 500")
        return support.student_reply(messages, tools, sampling_args)

    cfg = build_config("test", env_id="toy-gepa", model="student", reflection_model="reflector", max_calls=150,
                       num_train=20, num_val=10, minibatch_size=3, run_dir=str(tmp_path / "run"), display="plain")
    outcome, run_dir = asyncio.run(run_search(cfg, False, io.StringIO(),
                                              pools=(support.Pool(support.ScriptedClient(student), "student"),
                                                     support.reflector())))
    iterations = lines(run_dir / "iterations.jsonl")
    accepted = [it for it in iterations if it["accepted"]]
    assert accepted, [it["reason"] for it in iterations]
    # accepted although most of its validation rollouts errored: the seed errored on the same rows
    candidates = lines(run_dir / "candidates.jsonl")
    assert candidates[0]["val_errored"] == 7 and all(c["val_errored"] == 7 for c in candidates[1:])
    assert len(candidates) == 1 + len(accepted)
    assert not any(it["reason"].startswith("errored on") or "validation rollouts (more than half" in it["reason"]
                   for it in iterations)
    assert outcome.best.idx != 0  # a child beat the seed on the rows that were scored
