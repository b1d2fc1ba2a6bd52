"""`prime eval run … -m local` against the real vLLM + SmolLM2 server started by `prime serve`."""

from __future__ import annotations

import json

from tests.evals.cli_support import only_run_dir, read_rows

from .conftest import run_eval, shared_data_dir

TOKEN_ARGS = json.dumps({"logprobs": True, "extra_body": {"return_token_ids": True}})


def check_run(done, server, out, expected_rows):
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"using the local server at {server.url}" in done.stderr  # no second server was started
    run_dir = only_run_dir(out)
    metadata = json.loads((run_dir / "metadata.json").read_text())
    assert (metadata["status"], metadata["model"], metadata["base_url"]) == ("completed", "SmolLM2-135M-Instruct", server.url)
    rows = read_rows(run_dir)
    assert len(rows) == expected_rows
    assert not [r["error"] for r in rows if r["error"]]
    return metadata, rows


def test_reverse_text_with_token_ids_and_logprobs(local_server, prime_cache, tmp_path):
    done = run_eval(["reverse-text", "-m", "local", "-n", "6", "-r", "2", "-s", "-o", str(tmp_path),
                     "-C", "trajectory", "-S", TOKEN_ARGS], prime_cache)
    _, rows = check_run(done, local_server, tmp_path, 12)
    assert all(0.0 <= r["reward"] <= 1.2 for r in rows)
    assert any(r["completion"][-1]["content"].strip() for r in rows)
    for row in rows:
        (step,) = row["trajectory"]
        ids, logprobs = step["completion_token_ids"], step["completion_logprobs"]
        assert ids and len(ids) == len(logprobs) == row["token_usage"]["completion_tokens"]
        assert all(isinstance(t, int) for t in ids) and all(lp <= 0.0 for lp in logprobs)
        assert len(step["prompt_token_ids"]) == row["token_usage"]["prompt_tokens"]


def test_alphabet_sort_multi_turn(local_server, prime_cache, tmp_path):
    done = run_eval(["alphabet-sort", "-n", "2", "-r", "2", "-t", "96", "-s", "-o", str(tmp_path)], prime_cache)
    _, rows = check_run(done, local_server, tmp_path, 4)  # -m local is the default
    assert {r["stop_condition"] for r in rows} <= {"all_turns_answered", "max_turns_reached", "prompt_too_long"}
    assert all(0.0 <= r["reward"] <= 1.0 for r in rows)


def test_gsm8k_end_to_end(local_server, prime_cache, tmp_path):
    done = run_eval(["gsm8k", "-m", "local", "-n", "4", "-r", "2", "-t", "192", "-s", "-o", str(tmp_path)],
                    prime_cache, {"PRIME_DATA_DIR": str(shared_data_dir())})
    metadata, rows = check_run(done, local_server, tmp_path, 8)
    assert set(metadata["avg_metrics"]) == {"correct_answer", "boxed_format"}
    assert all(r["answer"] for r in rows)


def test_wordle_end_to_end(local_server, prime_cache, tmp_path):
    done = run_eval(["wordle", "-m", "local", "-n", "2", "-r", "2", "-t", "48", "-s", "-o", str(tmp_path)],
                    prime_cache)
    _, rows = check_run(done, local_server, tmp_path, 4)
    assert all(len([m for m in r["completion"] if m["role"] == "assistant"]) >= 1 for r in rows)
