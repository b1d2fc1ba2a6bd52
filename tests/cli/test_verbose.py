"""`prime eval run -v` shows each finished rollout; the summary says whether the run is a useful RL baseline."""

from __future__ import annotations

import json
import statistics
import threading
from collections import defaultdict
from pathlib import Path

from tests.cli.conftest import metadata, run_dirs
from tests.support.cli import REPO, TerminalSession, run_prime
from tests.support.scripted_server import ScriptedOpenAIServer, default_reply

WRONG = "<reversed_text>####</reversed_text>"  # reverse-text: lcs 0, format 1 -> reward 0.2


def eval_args(url: str, *extra: str) -> list[str]:
    return ["eval", "run", "reverse-text", "-m", "scripted-model", "-b", url, *extra]


def blocks(stdout: str) -> dict[tuple[int, int], list[str]]:
    """The -v blocks of plain output: (example, rollout) -> the block's lines, header first."""
    found: dict[tuple[int, int], list[str]] = {}
    current: list[str] | None = None
    for line in stdout.splitlines():
        if line.startswith("reverse-text example ") or line.startswith("math-python example "):
            words = line.split()
            current = found.setdefault((int(words[2]), int(words[4].rstrip(":"))), [])
            current.append(line)
        elif current is not None and line.startswith("  "):
            current.append(line)
        else:
            current = None
    return found


def test_verbose_plain_prints_every_rollout_with_prompt_completion_reward_and_metrics(tmp_path, scripted):
    result = run_prime(eval_args(scripted.url, "-n", "3", "-r", "2", "-v", "-s"), tmp_path)
    assert result.returncode == 0, result.stderr
    shown = blocks(result.stdout)
    assert sorted(shown) == [(e, r) for e in range(3) for r in range(2)]
    rows = [json.loads(line) for line in (run_dirs(tmp_path)[0] / "results.jsonl").read_text().splitlines()]
    for row in rows:
        header, *body = shown[(row["example_id"], row["rollout_idx"])]
        assert f"reward {row['reward']:.3f}" in header
        for name, value in row["metrics"].items():
            assert f"{name}={value:.3f}" in header
        assert f"stop={row['stop_condition']}" in header
        question = row["prompt"][-1]["content"]
        assert body[0] == f"  prompt: {question}"
        assert body[1] == f"  assistant: {row['completion'][-1]['content']}"
    # -v still writes debug records (one per rollout, among others) to eval.log
    log = (run_dirs(tmp_path)[0] / "eval.log").read_text()
    assert log.count("DEBUG prime_cli.evals: rollout finished: example ") == 6


def test_without_verbose_no_rollout_blocks(tmp_path, scripted):
    result = run_prime(eval_args(scripted.url, "-n", "2", "-r", "1"), tmp_path)
    assert result.returncode == 0, result.stderr
    assert blocks(result.stdout) == {}
    assert "example 0 rollout 0" not in result.stdout


def test_verbose_json_emits_a_rollout_event_per_rollout(tmp_path, scripted):
    result = run_prime(eval_args(scripted.url, "-n", "2", "-r", "2", "-v", "--json"), tmp_path)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]  # every stdout line is JSON
    rollouts = [e for e in events if e["event"] == "rollout"]
    assert sorted((e["example_id"], e["rollout_idx"]) for e in rollouts) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for event in rollouts:
        assert event["env_id"] == "reverse-text"
        assert set(event["metrics"]) == {"lcs_reward", "format_reward"}
        assert event["completion"][-1]["role"] == "assistant"
        assert event["completion"][-1]["text"] == default_reply({"messages": [
            {"role": "user", "content": event["prompt_tail"]}]})
        assert event["error"] is None
    done = events[-1]
    assert done["event"] == "done"
    assert done["summary"]["reward_diversity"]["groups_compared"] == 2
    assert done["summary"]["difficulty"]["verdict"] == "too easy"


def test_verbose_shows_a_multi_turn_tool_rollout(tmp_path):
    def reply(request):
        if any(m.get("role") == "tool" for m in request["messages"]):
            return "The tool says 42, so the answer is \\boxed{42}"
        return {"tool_calls": [{"function": {"name": "python", "arguments": {"code": "print(6 * 7)"}}}]}

    with ScriptedOpenAIServer(reply=reply) as server:
        result = run_prime(["eval", "run", "math-python", "-m", "scripted-model", "-b", server.url, "-n", "1",
                            "-r", "1", "-v"], tmp_path, extra_env={"PRIME_DATA_DIR": str(REPO / "tests" / "data")})
    assert result.returncode == 0, result.stderr
    (header, *body), = blocks(result.stdout).values()
    assert header.startswith("math-python example 0 rollout 0:")
    assert body[0].startswith("  prompt: ")
    assert body[1] == '  assistant: → python({"code": "print(6 * 7)"})'
    assert body[2].startswith("  tool") and body[2].endswith(": 42")
    assert body[3] == "  assistant: The tool says 42, so the answer is \\boxed{42}"


def test_verbose_rich_prints_rollouts_above_the_live_panel(tmp_path, scripted):
    with TerminalSession(eval_args(scripted.url, "-n", "3", "-r", "1", "-v"), tmp_path, lines=60) as term:
        screen = term.wait_for("Eval summary")
        assert term.wait_exit() == 0
    screen = term.text()
    for example in range(3):
        assert screen.count(f"example {example} rollout 0:") == 1, screen
    assert "prompt " in screen and "assistant <reversed_text>" in screen
    # the blocks come before the final progress panel and the summary, not mixed into them
    assert screen.index("example 2 rollout 0:") < screen.index("3/3") < screen.index("Eval summary")


def alternating_server() -> ScriptedOpenAIServer:
    """Right, wrong, right, wrong...: with -c 1 the two rollouts of each group get one of each."""
    lock, calls = threading.Lock(), [0]

    def reply(request):
        with lock:
            calls[0] += 1
            right = calls[0] % 2 == 1
        return default_reply(request) if right else WRONG

    return ScriptedOpenAIServer(reply=reply)


def expected_diversity(results: Path) -> tuple[float, float]:
    groups = defaultdict(list)
    for line in results.read_text().splitlines():
        row = json.loads(line)
        groups[row["example_id"]].append(row["reward"])
    stds = [statistics.pstdev(rewards) for rewards in groups.values()]
    equal = [max(rewards) == min(rewards) for rewards in groups.values()]
    return statistics.fmean(stds), sum(equal) / len(equal)


def test_summary_reports_group_diversity_in_output_and_metadata(tmp_path):
    with alternating_server() as server:
        result = run_prime(eval_args(server.url, "-n", "3", "-r", "2", "-c", "1", "-s"), tmp_path)
    assert result.returncode == 0, result.stderr
    run_dir, = run_dirs(tmp_path)
    mean_std, equal_fraction = expected_diversity(run_dir / "results.jsonl")
    assert (round(mean_std, 6), equal_fraction) == (0.5, 0.0)  # rewards 1.2 and 0.2 in every group
    diversity = metadata(run_dir)["summary"]["reward_diversity"]
    assert diversity["mean_group_reward_std"] == mean_std
    assert diversity["all_equal_fraction"] == equal_fraction
    assert "Group diversity: mean within-group reward std 0.500; all rewards equal in 0/3 groups (0.0%)" in result.stdout
    difficulty = metadata(run_dir)["summary"]["difficulty"]
    assert (difficulty["passed"], difficulty["rollouts"], difficulty["verdict"]) == (3, 6, "ok")
    assert "Difficulty: 50.0% of rollouts reach reward >= 1.0 (--pass-threshold; 3/6): in range for RL" in result.stdout
    assert "What to do" not in result.stdout


def test_summary_with_one_rollout_per_example_says_diversity_needs_more(tmp_path, scripted):
    result = run_prime(eval_args(scripted.url, "-n", "2", "-r", "1", "--json"), tmp_path)
    assert result.returncode == 0, result.stderr
    done = json.loads(result.stdout.splitlines()[-1])
    diversity = done["summary"]["reward_diversity"]
    assert diversity["groups_compared"] == 0 and diversity["mean_group_reward_std"] is None
    assert "-r > 1" in diversity["note"]
    plain = run_prime(eval_args(scripted.url, "-n", "2", "-r", "1"), tmp_path)
    assert "Group diversity: not measured: one rollout per example; use -r 2 or more" in plain.stdout


def test_summary_says_when_a_baseline_is_too_easy(tmp_path, scripted):
    result = run_prime(eval_args(scripted.url, "-n", "2", "-r", "2"), tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Difficulty: 100.0% of rollouts reach reward >= 1.0 (--pass-threshold; 4/4): too easy for RL" in result.stdout
    assert "What to do: little to learn" in result.stdout
    assert "all rewards equal in 2/2 groups (100.0%)" in result.stdout


def test_summary_says_when_a_baseline_is_too_hard_and_follows_the_pass_threshold(tmp_path):
    with ScriptedOpenAIServer(reply=lambda request: WRONG) as server:
        hard = run_prime(eval_args(server.url, "-n", "2", "-r", "2"), tmp_path)
        lenient = run_prime(eval_args(server.url, "-n", "2", "-r", "2", "--pass-threshold", "0.2"), tmp_path)
    assert hard.returncode == 0, hard.stderr
    assert "Difficulty: 0.0% of rollouts reach reward >= 1.0 (--pass-threshold; 0/4): too hard for RL" in hard.stdout
    assert "What to do: no signal: groups whose rewards are all equal give zero advantage" in hard.stdout
    assert "reach reward >= 0.2 (--pass-threshold; 4/4): too easy for RL" in lenient.stdout


def test_verbose_shows_the_error_of_a_failed_rollout(tmp_path):
    with ScriptedOpenAIServer(faults=["500"]) as server:
        result = run_prime(eval_args(server.url, "-n", "1", "-r", "2", "-c", "1", "-v", "--max-retries", "0",
                                     "--max-error-rate", "0.5"), tmp_path)
    assert result.returncode == 0, result.stderr
    shown = blocks(result.stdout)
    failed = [lines for lines in shown.values() if any(line.startswith("  error: ") for line in lines)]
    assert len(shown) == 2 and len(failed) == 1
    header, *body = failed[0]
    assert "stop=has_error" in header
    assert body[-1].startswith("  error: ModelError: ") and "HTTP 500" in body[-1]
    # the errored rollout is left out of the diversity and difficulty figures, and the summary says why
    assert "Group diversity: not measured: no example has two rollouts without errors" in result.stdout
    assert "(--pass-threshold; 1/1, 1 with errors left out)" in result.stdout
