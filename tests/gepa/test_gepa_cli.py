"""`prime gepa run` end to end: the real CLI in a subprocess, scripted models on a loopback server."""

import json
import math
import shlex
import statistics

import pytest

from prime_cli.records.gepa_run import read_gepa_run
from tests.evals.cli_support import run_prime
from tests.gepa import support
from tests.support.scripted_server import ScriptedOpenAIServer

FILES = {"metadata.json", "candidates.jsonl", "iterations.jsonl", "pareto_frontier.jsonl", "best_prompt.txt",
         "system_prompt.txt", "state.json"}
META = {"run_id", "env_id", "env_args", "model", "reflection_model", "status", "created_at", "completed_at",
        "num_candidates", "best_idx", "best_score", "total_metric_calls", "max_calls", "seed_val_score",
        "seed_test_score", "best_test_score", "config", "intervals"}
T_975_9DF = 2.262157  # Student t quantile, 97.5%, 9 degrees of freedom


def reply(body):
    messages = body["messages"]
    if body["model"] == "reflector":
        return support.reflector_reply(messages, None, None)
    return support.student_reply(messages, None, None)


def gepa(tmp_path, url, *extra, models=None):
    support.write_toy_env(tmp_path)
    return run_prime(["gepa", "run", "toy-gepa", "-m", "student", "-M", "reflector", "-b", url, "-n", "20", "-N", "10",
                      *extra], tmp_path)


def test_run_writes_every_file_and_prints_the_best_prompt(tmp_path):
    with ScriptedOpenAIServer(reply) as server:
        result = gepa(tmp_path, server.url, "-B", "150", "--num-test", "10", "-c", "4")
    assert result.returncode == 0, result.stderr
    runs = list((tmp_path / "environments" / "toy_gepa" / "outputs" / "gepa" / "toy-gepa--student").iterdir())
    assert len(runs) == 1
    run_dir = runs[0]
    assert FILES <= {p.name for p in run_dir.iterdir()}
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert META <= set(meta) and meta["status"] == "completed" and meta["run_id"] == run_dir.name
    assert meta["best_score"] > meta["seed_val_score"] and meta["best_test_score"] > meta["seed_test_score"]
    assert meta["config"]["num_val"] == 10 and meta["max_calls"] == 150
    best = (run_dir / "best_prompt.txt").read_text()
    assert best in result.stdout and f"prime eval run toy-gepa -m student -b {server.url} -a " in result.stdout
    assert f"{meta['total_metric_calls']}/150 rollouts" in result.stdout
    student_calls = [r for r in server.requests_to("/v1/chat/completions") if r["json"]["model"] == "student"]
    assert len(student_calls) == meta["total_metric_calls"] + meta["test_metric_calls"]
    # 95% intervals over the validation rows (hand-computed: one score per row, Student t on rows - 1 df)
    candidates = [json.loads(line) for line in (run_dir / "candidates.jsonl").read_text().splitlines()]
    best_scores = next(c for c in candidates if c["candidate_idx"] == meta["best_idx"])["val_scores"]
    mean = statistics.fmean(best_scores)
    half = T_975_9DF * statistics.stdev(best_scores) / math.sqrt(10)
    intervals = meta["intervals"]
    assert intervals["validation_rows"] == 10 and intervals["best_val_ci95"] == pytest.approx([mean - half, mean + half])
    shown = f" [{mean - half:.3f}, {mean + half:.3f}]" if half > 0 else ""  # no bracket when every row scored the same
    assert f"best {mean:.4f}{shown} (candidate {meta['best_idx']}; " in result.stdout and " 10 validation rows, " in result.stdout
    test = intervals["test_difference"]
    assert test["rows"] == 10 and test["difference"] == pytest.approx(meta["best_test_score"] - meta["seed_test_score"])
    assert f"best vs seed on the test rows: {test['verdict']}" in result.stdout
    assert test["verdict"].startswith(("the best prompt is better", "no detectable difference", "no difference"))


def test_toml_config_with_flag_overrides(tmp_path):
    with ScriptedOpenAIServer(reply) as server:
        config = tmp_path / "gepa.toml"
        config.write_text(f'env_id = "toy-gepa"\nmodel = "student"\nreflection_model = "reflector"\n'
                          f'base_url = "{server.url}"\nmax_calls = 100\nnum_train = 20\nnum_val = 10\n'
                          f'minibatch_size = 2\nperfect_score = 1.0\nstate_columns = ["turn"]\n')
        support.write_toy_env(tmp_path)
        result = run_prime(["gepa", "run", str(config), "-B", "90", "-o", str(tmp_path / "run")], tmp_path)
    assert result.returncode == 0, result.stderr
    meta = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert meta["max_calls"] == 90 and meta["config"]["minibatch_size"] == 2
    assert meta["config"]["perfect_score"] == 1.0 and meta["config"]["state_columns"] == ["turn"]


def test_budget_below_one_validation_pass_names_the_minimum(tmp_path):
    result = gepa(tmp_path, "http://127.0.0.1:9/v1", "-B", "10")
    assert result.returncode == 2
    assert result.stderr.startswith("error: --max-calls 10 is below the minimum of 26") and "Traceback" not in result.stderr


def test_bad_config_key_is_one_line(tmp_path):
    config = tmp_path / "gepa.toml"
    config.write_text('env_id = "toy-gepa"\nmax_cals = 100\n')
    result = run_prime(["gepa", "run", str(config)], tmp_path)
    assert result.returncode == 2 and "unknown key 'max_cals' (did you mean 'max_calls'?)" in result.stderr


def test_unusable_reflection_model_stops_the_run_and_keeps_what_it_found(tmp_path):
    with ScriptedOpenAIServer(reply, models=["student"]) as server:
        result = gepa(tmp_path, server.url, "-B", "100", "-o", str(tmp_path / "run"))
    assert result.returncode == 1
    assert "reflection model reflector" in result.stderr and "not found" in result.stderr
    assert "Traceback" not in result.stderr
    meta = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert meta["status"] == "failed" and meta["num_candidates"] == 1
    assert (tmp_path / "run" / "best_prompt.txt").read_text() == "Answer the question."
    assert "Resume with: prime gepa run toy-gepa" in result.stdout


def test_resume_from_the_run_directory_continues_to_a_larger_budget(tmp_path):
    with ScriptedOpenAIServer(reply) as server:
        first = gepa(tmp_path, server.url, "-B", "30", "-o", str(tmp_path / "run"))
        calls_first = len(server.requests_to("/v1/chat/completions"))
        first_calls = json.loads((tmp_path / "run" / "metadata.json").read_text())["total_metric_calls"]
        again = gepa(tmp_path, server.url, "-B", "48", "-o", str(tmp_path / "run"))
        mismatch = gepa(tmp_path, server.url, "-B", "130", "-N", "12", "-o", str(tmp_path / "run"))
    assert first.returncode == 0 and again.returncode == 0, again.stderr
    assert calls_first > 0
    meta = json.loads((tmp_path / "run" / "metadata.json").read_text())
    # never past -B, and short of it by less than one proposal and the validation of its child (6 + 10)
    assert 30 - 16 < first_calls <= 30
    assert meta["max_calls"] == 48 and 48 - 16 < meta["total_metric_calls"] <= 48
    iterations = [json.loads(line) for line in (tmp_path / "run" / "iterations.jsonl").read_text().splitlines()]
    assert [it["iteration"] for it in iterations] == list(range(1, len(iterations) + 1))
    assert mismatch.returncode == 2 and "-N/--num-val 12 differs from the 10 that the run in" in mismatch.stderr


def test_reflections_that_give_nothing_new_stop_the_run_once_its_rollouts_are_all_paid(tmp_path):
    # a reflection cut at 3 tokens never closes its ``` block; after the 2 minibatches of the 6 train rows
    # are paid, each proposal costs nothing, so only the reflection limit can end the run before -B
    with ScriptedOpenAIServer(reply) as server:
        result = gepa(tmp_path, server.url, "-B", "200", "-n", "6", "-o", str(tmp_path / "run"),
                      "--reflection-sampling-args", '{"max_tokens": 3}')
        reflections = [r for r in server.requests_to("/v1/chat/completions") if r["json"]["model"] == "reflector"]
        meta = json.loads((tmp_path / "run" / "metadata.json").read_text())
        hint = next(line for line in result.stdout.splitlines() if line.startswith("To let the reflection model"))
        command = shlex.split(hint.split(": ", 1)[1].split(" (or ", 1)[0])
        resumed = run_prime(command[1:], tmp_path)  # the printed command, as pasted
        more = [r for r in server.requests_to("/v1/chat/completions") if r["json"]["model"] == "reflector"]
    assert result.returncode == 0, result.stderr
    # three fruitless reflections, then one edit step from the best before the search gives up (edit_step.py)
    assert len(reflections) == 2 + 3 + 1
    assert "Its instructions, one by one" in reflections[-1]["json"]["messages"][-1]["content"]
    assert command[:3] == ["prime", "gepa", "run"] and command[-2:] == ["--max-reflection-failures", "6"]
    assert resumed.returncode == 0, resumed.stderr
    assert len(more) == 6 + 3  # three more tries, then the same stop (the edit step was tried already)
    assert meta["status"] == "completed" and meta["total_metric_calls"] == 10 + 6
    assert meta["stop_reason"].startswith("the reflection model gave no new prompt to try in 3 proposals in a row")
    assert "stopped before the budget: the reflection model gave no new prompt" in result.stdout
    assert "--max-reflection-failures" in result.stdout and "Traceback" not in result.stderr
    assert (tmp_path / "run" / "best_prompt.txt").read_text() == "Answer the question."
    assert "in 6 proposals in a row" in json.loads((tmp_path / "run" / "metadata.json").read_text())["stop_reason"]


def test_the_validation_bracket_is_the_t_interval_over_rows_and_absent_without_spread():
    from prime_cli.gepa.uncertainty import bracket, intervals_record

    scores = [0.0, 1.0, 0.5, 1.0, 0.0, 0.5, 1.0, 1.0, 0.0, 0.5]
    half = T_975_9DF * statistics.stdev(scores) / math.sqrt(10)
    assert bracket(scores) == f" [{0.55 - half:.3f}, {0.55 + half:.3f}]"
    assert bracket([1.0] * 10) == "" and bracket([0.5]) == ""
    record = intervals_record([0.0] * 10, scores, [0.0, 0.5, 0.5, 0.0], [0.5, 0.5, 1.0, 0.5])
    assert record["best_val_ci95"] == pytest.approx([0.55 - half, 0.55 + half]) and record["seed_val_ci95"] == [0.0, 0.0]
    assert record["test_difference"]["difference"] == pytest.approx(0.375)
    assert (record["test_difference"]["better"], record["test_difference"]["worse"]) == (3, 0)


def test_the_budget_is_never_passed_and_a_late_winner_is_validated_on_the_rows_it_leaves(tmp_path):
    with ScriptedOpenAIServer(reply) as server:
        support.write_toy_env(tmp_path)
        result = run_prime(["gepa", "run", "toy-gepa", "-m", "student", "-M", "reflector", "-b", server.url, "-n", "20",
                            "-N", "20", "-B", "67", "--plain", "-o", str(tmp_path / "run")], tmp_path)
        student_calls = [r for r in server.requests_to("/v1/chat/completions") if r["json"]["model"] == "student"]
    assert result.returncode == 0, result.stderr
    meta = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert meta["total_metric_calls"] == len(student_calls) <= 67
    candidates = [json.loads(line) for line in (tmp_path / "run" / "candidates.jsonl").read_text().splitlines()]
    # 20 (seed) + 6 + 20 (first child) + 6 (the second proposal: its 3 fresh rows for parent and child):
    # 15 rollouts left for the second child
    late = candidates[-1]
    assert [c["val_rows_run"] for c in candidates] == [20, 20, 15]
    assert sum(s is not None for s in late["val_scores"]) == 15 and late["val_mean"] is not None
    assert "accepted as candidate 2 (validated on 15 of 20 rows: the budget left)" in result.stdout
    iterations = [json.loads(line) for line in (tmp_path / "run" / "iterations.jsonl").read_text().splitlines()]
    assert [it["child_val_rows_run"] for it in iterations if it["accepted"]] == [20, 15]
    assert read_gepa_run(tmp_path / "run").candidates[-1].val_rows_run == 15


PICK_SEED = 10  # a seed whose final pick overturns the leader by validation (the test asserts it does)


def noisy_student(seed: int):
    """The toy student answering right with probability 0.6 when the prompt names the row's kind (0.3 when
    not), drawn afresh on every asking (a hash of the request and how many times it was asked), so a
    candidate's validation score is luck as well and the final pick has something to overturn."""
    import hashlib
    import re
    import threading

    asked: dict[str, int] = {}
    lock = threading.Lock()

    def reply(body):
        messages = body["messages"]
        if body["model"] == "reflector":
            return support.reflector_reply(messages, None, None)
        kind = re.search(r"kind:(\w+)", messages[-1]["content"]).group(1)
        key = json.dumps([support.system_text(messages), messages[-1]["content"]])
        with lock:
            asked[key] = n = asked.get(key, 0) + 1
        draw = int(hashlib.sha256(f"{seed}:{key}:{n}".encode()).hexdigest()[:8], 16) / 16 ** 8
        return kind if draw < (0.6 if f"kind {kind}" in support.system_text(messages) else 0.3) else "unknown"

    return reply


def test_a_challenger_the_final_pick_prefers_is_the_best_in_every_file(tmp_path):
    with ScriptedOpenAIServer(noisy_student(PICK_SEED)) as server:
        result = gepa(tmp_path, server.url, "-B", "150", "--plain", "-o", str(tmp_path / "run"))
        student_calls = [r for r in server.requests_to("/v1/chat/completions") if r["json"]["model"] == "student"]
    assert result.returncode == 0, result.stderr
    meta = json.loads((tmp_path / "run" / "metadata.json").read_text())
    pick = meta["pick"]
    assert pick["best"] != pick["leader_by_validation"] and any(d["won"] for d in pick["duels"])  # what is tested
    assert all(d["challenger_lead"] > 0 and d["rows_rerun"] >= 2 for d in pick["duels"] if d["won"])
    candidates = [json.loads(line) for line in (tmp_path / "run" / "candidates.jsonl").read_text().splitlines()]
    best = candidates[pick["best"]]
    assert meta["best_idx"] == pick["best"] and meta["best_score"] == best["val_mean"]
    assert (tmp_path / "run" / "best_prompt.txt").read_text() == best["system_prompt"]
    assert (tmp_path / "run" / "system_prompt.txt").read_text() == best["system_prompt"]
    assert read_gepa_run(tmp_path / "run").best_prompt_text() == best["system_prompt"]
    assert f"the final pick chose {pick['best']} on fresh rollouts" in result.stdout
    assert meta["total_metric_calls"] == len(student_calls) <= 150
    assert pick["score_rollouts"] == sum(s is not None for s in best["val_scores"])
    assert pick["fresh_rollouts"] > 0


def test_one_fresh_draw_on_one_row_does_not_overturn_the_validation(tmp_path):
    # -N 1: a duel re-rolls one row at most; the challenger ahead on that one draw keeps its place behind
    with ScriptedOpenAIServer(noisy_student(0)) as server:
        result = gepa(tmp_path, server.url, "-N", "1", "-B", "60", "--plain", "-o", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    pick = json.loads((tmp_path / "run" / "metadata.json").read_text())["pick"]
    assert any(d["challenger_lead"] > 0 and d["rows_rerun"] == 1 for d in pick["duels"])  # what is tested
    assert pick["best"] == pick["leader_by_validation"] and not any(d["won"] for d in pick["duels"])


def test_a_ctrl_c_during_the_final_pick_cancels_the_run_before_its_test_pass(tmp_path):
    import signal
    import threading
    import time

    from tests.evals.cli_support import popen_prime

    noisy, asked, first_repeat = noisy_student(PICK_SEED), set(), threading.Event()

    def reply(body):  # a request asked twice is the pick's first re-roll (the cache asks no other twice)
        key = json.dumps(body["messages"])
        if body["model"] == "student" and key in asked and not first_repeat.is_set():
            first_repeat.set()
            time.sleep(1.0)  # still in flight when the Ctrl-C comes
        asked.add(key)
        return noisy(body)

    support.write_toy_env(tmp_path)
    with ScriptedOpenAIServer(reply) as server:
        proc = popen_prime(["gepa", "run", "toy-gepa", "-m", "student", "-M", "reflector", "-b", server.url, "-n", "20",
                            "-N", "10", "-B", "150", "--num-test", "10", "--plain", "-o", str(tmp_path / "run")], tmp_path)
        assert first_repeat.wait(60), "the run made no final pick"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    meta = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert proc.returncode == 1, out[-2000:] + err[-2000:]
    assert meta["status"] == "cancelled" and not meta.get("test_metric_calls") and meta.get("best_test_score") is None
    assert "-R" in out + err  # the resume command


def test_a_partially_validated_best_is_scored_over_every_validation_row_by_its_paired_lead(tmp_path):
    """A late winner run on 15 of 20 rows: its raw mean on those rows is what made it win, and those rows are
    no sample of the whole, so best_score is the fully validated leader's mean plus the winner's paired lead
    over it on the rows both were scored on (a 1.0 on 11 of 50 rows had tested 0.75, issue 57)."""
    with ScriptedOpenAIServer(reply) as server:
        support.write_toy_env(tmp_path)
        result = run_prime(["gepa", "run", "toy-gepa", "-m", "student", "-M", "reflector", "-b", server.url, "-n", "20",
                            "-N", "20", "-B", "67", "--plain", "--json", "-o", str(tmp_path / "run")], tmp_path)
    assert result.returncode == 0, result.stderr
    meta = json.loads((tmp_path / "run" / "metadata.json").read_text())
    candidates = [json.loads(line) for line in (tmp_path / "run" / "candidates.jsonl").read_text().splitlines()]
    late, leader = candidates[2], candidates[1]
    assert meta["best_idx"] == 2 and late["val_rows_run"] == 15 and leader["val_rows_run"] == 20
    shared = [r for r, s in enumerate(late["val_scores"]) if s is not None]
    lead = sum(late["val_scores"][r] - leader["val_scores"][r] for r in shared) / len(shared)
    expected = statistics.mean(leader["val_scores"]) + lead
    assert expected != pytest.approx(late["val_mean"])  # the raw mean over its 15 rows is another number
    assert meta["best_score"] == pytest.approx(expected)
    done = json.loads(result.stdout.strip().splitlines()[-1])
    assert done["best_score"] == pytest.approx(expected)
