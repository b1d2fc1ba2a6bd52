"""The dollar cost of eval and GEPA runs, and `--max-cost`, through the installed `prime` against the scripted
server: prices from a registry entry or LiteLLM's table, to the cent; unknown prices said, never $0; the cap
stops a run that `-R` then finishes with the spend carried; the judge's tokens priced as its own role."""

from __future__ import annotations

import glob
import json
import re
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import metadata, one_error_line, record_local_server, run_dirs
from tests.support.cli import run_prime, run_shell

PRICED = 10_000.0, 20_000.0  # dollars per million tokens: a cent per prompt token, two per completion token

JUDGE_ENV = '''
import prime_cli.envs as vf


def load_environment():
    rows = [{"question": w, "answer": w[::-1]} for w in ["alpha", "bravo", "charlie"]]
    rubric = vf.JudgeRubric(judge_model="gpt-4.1-nano")

    async def judged(judge, prompt, completion, answer, state) -> float:
        return 1.0 if "yes" in (await judge(prompt, completion, answer, state)).lower() else 0.0

    rubric.add_reward_func(judged)
    return vf.SingleTurnEnv(eval_dataset=rows, system_prompt="Reverse the word.", rubric=rubric)
'''


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, scripted) -> Path:
    root = tmp_path_factory.mktemp("cost")
    (root / "configs").mkdir()
    (root / "configs" / "endpoints.toml").write_text(f"""
[[endpoint]]
endpoint_id = "priced"
model = "scripted-model"
url = "{scripted.url}"
input_price = {PRICED[0]}
output_price = {PRICED[1]}

[[endpoint]]
endpoint_id = "mini"
model = "gpt-4.1-mini"
url = "{scripted.url}"

[[endpoint]]
endpoint_id = "mystery"
model = "scripted-model"
url = "{scripted.url}"
""")
    return root


def rows_of(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def tokens(rows: list[dict]) -> tuple[int, int]:
    return (sum(r["token_usage"]["prompt_tokens"] for r in rows),
            sum(r["token_usage"]["completion_tokens"] for r in rows))


def litellm_prices(model: str) -> tuple[float, float]:
    """The installed LiteLLM table's prices of `model`, per million tokens."""
    path = glob.glob(str(Path(sys.executable).parents[1] / "lib" / "python*" / "site-packages" / "litellm"
                         / "model_prices_and_context_window_backup.json"))[0]
    entry = json.loads(Path(path).read_text())[model]
    return entry["input_cost_per_token"] * 1e6, entry["output_cost_per_token"] * 1e6


def test_registry_prices_give_the_cost_to_the_cent(workspace):
    result = run_prime(["eval", "run", "reverse-text", "-m", "priced", "-n", "3", "-r", "2", "-s"], workspace)
    assert result.returncode == 0, result.stderr
    run_dir = run_dirs(workspace / "outputs")[-1]
    prompt, completion = tokens(rows_of(run_dir))
    assert prompt > 0 and completion > 0
    expected = prompt * 0.01 + completion * 0.02  # by hand: $10,000 and $20,000 per million tokens
    cost = metadata(run_dir)["cost"]
    assert cost["total_usd"] == pytest.approx(expected, abs=1e-9)
    student = cost["roles"]["student"]
    assert (student["prompt_tokens"], student["completion_tokens"]) == (prompt, completion)
    assert student["prices"][0]["source"] == "registry" and student["prices"][0]["input_per_million"] == PRICED[0]
    assert f"Cost: ${expected:,.2f} (priced: $10,000 in / $20,000 out per 1M tokens, endpoint registry)" in result.stdout


def test_litellm_table_prices_a_known_model_name(workspace):
    assert litellm_prices("gpt-4.1-mini") == pytest.approx((0.4, 1.6))  # the table in the venv
    result = run_prime(["eval", "run", "reverse-text", "-m", "mini", "-n", "3", "-r", "2", "--json"], workspace)
    assert result.returncode == 0, result.stderr
    done = json.loads(result.stdout.splitlines()[-1])
    usage = done["summary"]["usage"]
    expected = (usage["prompt_tokens"] * 0.4 + usage["completion_tokens"] * 1.6) / 1e6
    cost = done["summary"]["cost"]
    assert cost["total_usd"] == pytest.approx(expected, rel=1e-9)
    assert cost["roles"]["student"]["prices"][0]["source"] == "litellm"


def test_unknown_prices_say_unknown_and_max_cost_is_refused(workspace):
    result = run_prime(["eval", "run", "reverse-text", "-m", "mystery", "-n", "2", "-r", "1", "-s"], workspace)
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("Cost: "))
    assert line.startswith("Cost: unknown (no prices for mystery") and "input_price" in line and "$0" not in line
    assert metadata(run_dirs(workspace / "outputs/evals/reverse-text--mystery")[-1])["cost"]["total_usd"] is None
    refused = run_prime(["eval", "run", "reverse-text", "-m", "mystery", "--max-cost", "1"], workspace)
    one_error_line(refused, "--max-cost", "mystery", "input_price", "output_price")
    for bad in ("0", "-1"):
        one_error_line(run_prime(["eval", "run", "reverse-text", "-m", "priced", "--max-cost", bad], workspace),
                       "max-cost", "positive")


def test_a_local_server_is_free_not_unknown(workspace, scripted):
    result = run_prime(["eval", "run", "reverse-text", "-m", "scripted-model", "-b", scripted.url, "-n", "2",
                        "-r", "1"], workspace)
    assert result.returncode == 0, result.stderr
    assert "Cost: $0.00 (free: -b server on this machine)" in result.stdout


def test_bad_registry_prices_are_one_line_naming_the_file_and_block(tmp_path, scripted):
    (tmp_path / "configs").mkdir()
    registry = tmp_path / "configs" / "endpoints.toml"
    registry.write_text(f'[[endpoint]]\nendpoint_id = "x"\nmodel = "m"\nurl = "{scripted.url}"\n'
                        'input_price = -1\noutput_price = 2\n')
    one_error_line(run_prime(["eval", "run", "reverse-text", "-m", "x"], tmp_path),
                   "endpoints.toml", "endpoint 1", "input_price", "non-negative")
    registry.write_text(f'[[endpoint]]\nendpoint_id = "x"\nmodel = "m"\nurl = "{scripted.url}"\ninput_price = 1\n')
    one_error_line(run_prime(["eval", "run", "reverse-text", "-m", "x"], tmp_path), "output_price")


def test_max_cost_stops_the_run_and_resume_finishes_it_counting_what_was_spent(workspace):
    out = workspace / "capped"
    result = run_prime(["eval", "run", "reverse-text", "-m", "priced", "-n", "10", "-r", "2", "-c", "2", "-s",
                        "--max-cost", "2", "-o", str(out)], workspace)
    assert result.returncode == 1, result.stdout + result.stderr
    run_dir = run_dirs(out)[-1]
    meta, rows = metadata(run_dir), rows_of(run_dir)
    assert meta["status"] == "cancelled" and meta["cost"]["cap_reached"] is True
    spent = meta["cost"]["total_usd"]
    prompt, completion = tokens(rows)
    assert spent == pytest.approx(prompt * 0.01 + completion * 0.02) and 0 < spent <= 2
    assert 0 < len(rows) < 20
    assert "estimated $" in result.stdout and "from the average of the" in result.stdout
    assert re.search(r"\] .* spent=\$\d+\.\d\d", result.stdout), result.stdout  # the spend on the progress line
    line = next(x for x in result.stderr.splitlines() if "cost cap reached" in x)
    assert f"spent ${spent:.2f} of $2.00" in line
    resume = re.search(r"resume with a higher cap: (prime eval run .*)$", line)[1]
    assert f"-R {run_dir.resolve()}" in resume and "--max-cost" in resume

    finished = run_shell(resume, workspace)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    meta, all_rows = metadata(run_dir), rows_of(run_dir)
    assert meta["status"] == "completed" and len(all_rows) == 20
    assert {(r["example_id"], r["rollout_idx"]) for r in rows} <= {(r["example_id"], r["rollout_idx"]) for r in all_rows}
    assert len({(r["example_id"], r["rollout_idx"]) for r in all_rows}) == 20  # nothing run twice
    prompt, completion = tokens(all_rows)
    assert meta["cost"]["total_usd"] == pytest.approx(prompt * 0.01 + completion * 0.02)  # the earlier spend too
    assert meta["cost"]["total_usd"] <= float(resume.rsplit(" ", 1)[1])


def test_a_resumed_run_under_its_old_cap_stops_at_once(workspace):
    out = workspace / "capped-again"
    first = run_prime(["eval", "run", "reverse-text", "-m", "priced", "-n", "10", "-r", "2", "-c", "2", "-s",
                       "--max-cost", "2", "-o", str(out)], workspace)
    assert first.returncode == 1
    run_dir = run_dirs(out)[-1]
    before = len(rows_of(run_dir))
    again = run_prime(["eval", "run", "reverse-text", "-m", "priced", "-R", str(run_dir), "--max-cost", "2"],
                      workspace)
    assert again.returncode == 1 and "cost cap reached" in again.stderr
    assert len(rows_of(run_dir)) == before  # the earlier spend left no room: nothing new was sent


def test_judge_tokens_are_priced_as_the_judge_role(tmp_path, scripted, workspace):
    env_dir = tmp_path / "environments" / "judge_toy"
    env_dir.mkdir(parents=True)
    (env_dir / "judge_toy.py").write_text(JUDGE_ENV)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "endpoints.toml").write_text((workspace / "configs" / "endpoints.toml").read_text())
    result = run_prime(["eval", "run", "judge-toy", "-m", "priced", "-n", "3", "-r", "1", "-s"], tmp_path,
                       extra_env={"OPENAI_BASE_URL": scripted.url, "OPENAI_API_KEY": "sk-test"})
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = run_dirs(tmp_path)[-1]
    rows = rows_of(run_dir)
    judge_in = sum(r["judge_usage"]["gpt-4.1-nano"]["prompt_tokens"] for r in rows)
    judge_out = sum(r["judge_usage"]["gpt-4.1-nano"]["completion_tokens"] for r in rows)
    assert judge_in > 0 and all(r["judge_usage"]["gpt-4.1-nano"]["calls"] == 1 for r in rows)
    rates = litellm_prices("gpt-4.1-nano")
    prompt, completion = tokens(rows)
    cost = metadata(run_dir)["cost"]
    assert cost["roles"]["judge"]["usd"] == pytest.approx((judge_in * rates[0] + judge_out * rates[1]) / 1e6)
    assert cost["total_usd"] == pytest.approx(prompt * 0.01 + completion * 0.02 + cost["roles"]["judge"]["usd"])
    assert "student $" in result.stdout and "judge $" in result.stdout

    # a rescore pays for its own judge calls only: the same prompts, the same judge tokens, no student
    env = {"OPENAI_BASE_URL": scripted.url, "OPENAI_API_KEY": "sk-test"}
    rescored = run_prime(["eval", "rescore", str(run_dir)], tmp_path, extra_env=env)
    assert rescored.returncode == 0, rescored.stdout + rescored.stderr
    new_dir = next(d for d in run_dirs(tmp_path) if d != run_dir)
    again = metadata(new_dir)["cost"]
    assert list(again["roles"]) == ["judge"] and again["total_usd"] == pytest.approx(cost["roles"]["judge"]["usd"])


def test_compare_shows_each_runs_cost(workspace):
    runs = run_dirs(workspace / "outputs/evals/reverse-text--priced")
    result = run_prime(["eval", "compare", str(runs[0]), str(runs[0])], workspace)
    assert result.returncode == 0, result.stderr
    total = metadata(runs[0])["cost"]["total_usd"]
    assert f"cost: A ${total:,.2f}; B ${total:,.2f}" in result.stdout
    as_json = json.loads(run_prime(["eval", "compare", str(runs[0]), str(runs[0]), "--json"], workspace).stdout)
    assert as_json["cost_usd"] == [total, total]


def test_gepa_cost_cap_stops_and_resume_counts_the_earlier_spend(workspace):
    run_dir = workspace / "gepa-capped"
    # -B 20: after the first proposal (8 rollouts) the budget still launches a second, whose reflection passes the cap
    result = run_prime(["gepa", "run", "reverse-text", "-m", "priced", "-n", "4", "-N", "2", "-B", "20", "--plain",
                        "-o", str(run_dir), "--max-cost", "20"], workspace)
    assert result.returncode == 1, result.stdout + result.stderr
    meta = metadata(run_dir)
    cost = meta["cost"]
    assert meta["status"] == "cancelled" and cost["cap_reached"] is True and 0 < cost["total_usd"] <= 20
    entries = [json.loads(x) for x in (run_dir / "rollouts.jsonl").read_text().splitlines()]
    student = sum(e["usage"]["prompt_tokens"] * 0.01 + e["usage"]["completion_tokens"] * 0.02 for e in entries)
    assert cost["roles"]["student"]["usd"] == pytest.approx(student)
    assert cost["roles"]["reflection"]["usd"] > 0
    assert f"cost: ${cost['total_usd']:,.2f} (student $" in result.stdout
    assert "| spent $" in result.stdout  # on the progress lines
    line = next(x for x in result.stderr.splitlines() if "cost cap reached" in x)
    assert f"spent ${cost['total_usd']:.2f} of $20.00" in line
    resume = re.search(r"resume with a higher cap: (prime gepa run .*)$", line)[1]
    again = run_shell(resume + " --plain", workspace)
    assert again.returncode in (0, 1), again.stderr
    later = metadata(run_dir)["cost"]
    assert later["roles"]["reflection"]["prompt_tokens"] > cost["roles"]["reflection"]["prompt_tokens"]
    assert later["total_usd"] > cost["total_usd"]  # counted on from what was spent
    assert later["total_usd"] <= float(resume.rsplit(" ", 1)[1])


@pytest.mark.parametrize("name", ["gpt-4.1-mini", "openai/gpt-4.1-mini"])
def test_a_litellm_route_is_priced_by_the_table(tmp_path, scripted, name):
    result = run_prime(["eval", "run", "reverse-text", "-m", name, "-n", "2", "-r", "1", "--json"], tmp_path,
                       extra_env={"OPENAI_BASE_URL": scripted.url, "OPENAI_API_KEY": "sk-test"})
    assert result.returncode == 0, result.stderr
    done = json.loads(result.stdout.splitlines()[-1])
    usage, cost = done["summary"]["usage"], done["summary"]["cost"]
    assert usage["prompt_tokens"] > 0
    assert cost["total_usd"] == pytest.approx((usage["prompt_tokens"] * 0.4 + usage["completion_tokens"] * 1.6) / 1e6)
    assert cost["roles"]["student"]["prices"][0]["source"] == "litellm"


def test_the_embedded_model_is_free_and_a_cap_on_it_is_never_reached(tmp_path, scripted):
    env = record_local_server(tmp_path / "cache", scripted)
    result = run_prime(["eval", "run", "reverse-text", "-m", "local", "-n", "2", "-r", "1", "--max-cost", "0.01"],
                       tmp_path, extra_env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Cost: $0.00 (free: embedded model); cap $0.01" in result.stdout


def test_gepa_json_done_event_carries_the_cost(workspace):
    run_dir = workspace / "gepa-json"
    result = run_prime(["gepa", "run", "reverse-text", "-m", "priced", "-M", "mini", "-n", "4", "-N", "2", "-B", "14",
                        "--json", "-o", str(run_dir)], workspace)
    assert result.returncode == 0, result.stderr
    done = json.loads(result.stdout.splitlines()[-1])
    cost = metadata(run_dir)["cost"]
    assert done["cost"] == cost and "cap_reached" not in cost  # no --max-cost
    reflection = cost["roles"]["reflection"]
    assert reflection["prices"][0]["source"] == "litellm" and reflection["prompt_tokens"] > 0
    assert reflection["usd"] == pytest.approx((reflection["prompt_tokens"] * 0.4 + reflection["completion_tokens"] * 1.6) / 1e6)
    assert cost["total_usd"] == pytest.approx(cost["roles"]["student"]["usd"] + reflection["usd"])


def test_errored_first_rollouts_do_not_lift_the_cap(tmp_path):
    """Errored rollouts that sent no token cost $0; averaged in, they made every next group look free and the
    whole run launched past the cap (it finished `completed`, 4x over). The average is of paid rollouts."""
    from tests.support.scripted_server import ScriptedOpenAIServer

    with ScriptedOpenAIServer(faults=["500"] * 4) as server:
        (tmp_path / "configs").mkdir()
        (tmp_path / "configs" / "endpoints.toml").write_text(
            f'[[endpoint]]\nendpoint_id = "flaky"\nmodel = "scripted-model"\nurl = "{server.url}"\n'
            f"input_price = {PRICED[0]}\noutput_price = {PRICED[1]}\n")
        result = run_prime(["eval", "run", "reverse-text", "-m", "flaky", "-n", "10", "-r", "2", "-c", "2", "-s",
                            "--max-retries", "0", "--max-error-rate", "1", "--max-cost", "2", "-o",
                            str(tmp_path / "out")], tmp_path)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    run_dir = run_dirs(tmp_path / "out")[-1]
    meta, rows = metadata(run_dir), rows_of(run_dir)
    assert meta["cost"]["cap_reached"] is True and meta["cost"]["total_usd"] <= 2
    assert sum(1 for r in rows if r.get("error")) == 4 and len(rows) < 20
    # the summary's resume line carries the higher cap too (the old one would stop the resumed run at once)
    resume_line = next(x for x in result.stdout.splitlines() if x.startswith("Resume with: "))
    assert "--max-cost" in resume_line and resume_line.split("Resume with: ")[1] in result.stderr


def test_max_cost_on_a_remote_server_without_prices_is_refused(tmp_path):
    """Shown as free (a -b server), such a model would never reach a cap: the cap refuses it, naming the fix."""
    line = one_error_line(run_prime(["eval", "run", "reverse-text", "-m", "my-paid-model", "-b",
                                     "http://192.0.2.2:8794/v1", "-n", "2", "--max-cost", "1"], tmp_path,
                                    {"OPENAI_API_KEY": "sk-test"}))
    assert "--max-cost 1" in line and "my-paid-model" in line and "input_price" in line
