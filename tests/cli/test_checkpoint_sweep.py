"""`prime eval run ENV --weights-dir OUT/weights`: the checkpoint sweep, through the installed `prime`,
against the scripted server in the role of a vLLM server with runtime LoRA loading. The adapter folders
are hand-made (the server does not read them); the server answers each adapter differently, so the
table's numbers and its best step come from the runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli.conftest import metadata, one_error_line, record_local_server, run_dirs, snapshot
from tests.support.cli import run_prime
from tests.support.scripted_server import ScriptedOpenAIServer, content_text

BASE = "base-model"


def reply_by_model(body: dict) -> str:
    """step_10 reverses the text, step_5 returns half of it reversed, anything else returns nothing useful."""
    text = content_text([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
    answer = {"step_10": text[::-1], "step_5": text[::-1][: len(text) // 2]}.get(body["model"], "no")
    return f"<reversed_text>{answer}</reversed_text>"


def make_weights(root: Path, steps=(0, 5, 10), base: str = "/models/base-model", rank: int = 8) -> Path:
    weights = root / "run" / "weights"
    for step in steps:
        folder = weights / f"step_{step}"
        folder.mkdir(parents=True)
        (folder / "adapter_config.json").write_text(json.dumps(
            {"r": rank, "lora_alpha": 16, "peft_type": "LORA", "base_model_name_or_path": base}))
        (folder / "adapter_model.safetensors").write_bytes(b"not read by the scripted server")
    return weights


def table_rows(stdout: str) -> dict[str, list[str]]:
    """The sweep table's rows by their first cell (the box-drawing table rich prints)."""
    rows = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if len(cells) >= 6 and (cells[0] == "base" or cells[0].startswith("step_")):
            rows[cells[0]] = cells
    return rows


def runs_by_model(root: Path) -> dict[str, dict]:
    return {metadata(d)["model"]: metadata(d) for d in run_dirs(root / "outputs")}


def sweep(tmp_path: Path, server: ScriptedOpenAIServer, *extra: str, env: dict | None = None):
    return run_prime(["eval", "run", "reverse-text", "--weights-dir", str(tmp_path / "run" / "weights"),
                      "-n", "3", "-r", "2", *extra], tmp_path, env)


def test_sweep_saves_one_run_per_step_and_prints_the_table_with_the_best_marked(tmp_path):
    weights = make_weights(tmp_path)
    with ScriptedOpenAIServer(reply=reply_by_model, models=[BASE]) as server:
        result = sweep(tmp_path, server, "-b", server.url)
        loads = [r["json"] for r in server.requests_to("/v1/load_lora_adapter")]
        left_loaded = dict(server.adapters)
    assert result.returncode == 0, result.stderr
    runs = runs_by_model(tmp_path)
    assert set(runs) == {BASE, "step_0", "step_5", "step_10"}
    for model, meta in runs.items():
        step = None if model == BASE else int(model.split("_")[1])
        assert meta["status"] == "completed" and meta["num_examples"] == 3 and meta["rollouts_per_example"] == 2
        assert meta["sweep"] == {"weights_dir": str(weights.resolve()), "step": step,
                                 "adapter": None if step is None else model}
    assert [(x["lora_name"], x["lora_path"]) for x in loads] == [
        (f"step_{s}", str((weights / f"step_{s}").resolve())) for s in (0, 5, 10)]
    assert left_loaded == {}  # each adapter is unloaded when its run ends
    rows = table_rows(result.stdout)
    assert list(rows) == ["base", "step_0", "step_5", "step_10"]
    for label, model in (("base", BASE), ("step_0", "step_0"), ("step_5", "step_5"), ("step_10", "step_10")):
        assert rows[label][1] == f"{runs[model]['avg_reward']:.3f}"  # mean reward
        assert rows[label][7] == "6"  # rollouts
    assert runs["step_10"]["avg_reward"] > runs["step_5"]["avg_reward"] > runs["step_0"]["avg_reward"]
    assert [label for label, cells in rows.items() if "<- best" in cells] == ["step_10"]
    assert rows["step_10"][5] == "1.000" and rows["step_0"][5] == "0.000"  # pass@2
    assert rows["step_10"][6] == "1.000" and rows["step_0"][6] == "0.000"  # pass^2
    assert rows["base"][3] == "-" and rows["step_10"][3].startswith("+") and "p < 0.001" in rows["step_10"][3]
    assert "pass@2" in result.stdout and "pass^2" in result.stdout and "Best: step_10" in result.stdout and "better than the base" in result.stdout
    # piped, the table keeps its natural width: every cell on one line, none cut to "step_…"
    assert "…" not in result.stdout and re.search(r"step_10 .*p < 0\.001 .*<- best", result.stdout)
    assert rows["step_10"][2] == "-"  # every example scored the same: no zero-width interval


def test_steps_and_no_eval_base_choose_what_is_evaluated_and_json_ends_with_the_sweep(tmp_path):
    make_weights(tmp_path)
    with ScriptedOpenAIServer(reply=reply_by_model, models=[BASE]) as server:
        result = sweep(tmp_path, server, "-b", server.url, "--steps", "5,0", "--no-eval-base", "--json")
    assert result.returncode == 0, result.stderr
    assert set(runs_by_model(tmp_path)) == {"step_0", "step_5"}
    event = json.loads(result.stdout.strip().splitlines()[-1])
    assert event["event"] == "sweep" and event["best"] == "step_5"
    assert [(r["label"], r["step"], r["num_rollouts"], r["k"]) for r in event["rows"]] == [
        ("step_0", 0, 6, 2), ("step_5", 5, 6, 2)]
    assert event["rows"][1]["avg_reward"] > event["rows"][0]["avg_reward"]


def test_a_missing_step_is_refused_before_anything_runs(tmp_path):
    make_weights(tmp_path)
    with ScriptedOpenAIServer(models=[BASE]) as server:
        result = sweep(tmp_path, server, "-b", server.url, "--steps", "5,7")
        requests = server.requests
    one_error_line(result, "step_7", "available steps: 0,5,10")
    assert requests == [] and not (tmp_path / "outputs").exists()


def test_a_refused_load_stops_the_sweep_with_the_fix_and_keeps_the_runs_done(tmp_path):
    make_weights(tmp_path)
    with ScriptedOpenAIServer(reply=reply_by_model, models=[BASE], lora_loads=1) as server:
        result = sweep(tmp_path, server, "-b", server.url)
    line = one_error_line(result, "step_5", "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve",
                          "--enable-lora", "--max-lora-rank 8")
    assert "2 evaluated and saved" in line
    runs = runs_by_model(tmp_path)
    assert set(runs) == {BASE, "step_0"} and all(m["status"] == "completed" for m in runs.values())
    assert list(table_rows(result.stdout)) == ["base", "step_0"]  # what was done is still shown


@pytest.mark.parametrize("args, needles", [
    (["--steps", "5"], ["--steps", "--weights-dir"]),
    (["--no-eval-base"], ["--no-eval-base", "--weights-dir"]),
    (["--weights-dir", "W", "--steps", "five"], ["--steps", "10,50,100"]),
    (["--weights-dir", "nowhere"], ["nowhere", "not a folder"]),
    (["--weights-dir", "W", "-m", "gpt-4.1-mini"], ["-m local", "-b URL"]),
    (["--weights-dir", "W", "-R"], ["-R"]),
])
def test_bad_sweep_flags_fail_with_one_line(tmp_path, args, needles):
    weights = make_weights(tmp_path)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "endpoints.toml").write_text(
        '[[endpoint]]\nendpoint_id = "gpt-4.1-mini"\nmodel = "gpt-4.1-mini"\nurl = "http://127.0.0.1:9/v1"\n')
    before = snapshot(tmp_path)
    result = run_prime(["eval", "run", "reverse-text", *[str(weights) if a == "W" else a for a in args]], tmp_path)
    one_error_line(result, *needles)
    assert snapshot(tmp_path) == before


def test_local_model_needs_a_prime_serve_started_with_lora(tmp_path):
    make_weights(tmp_path, rank=32)
    with ScriptedOpenAIServer(models=[BASE]) as server:
        env = record_local_server(tmp_path / "cache", server)
        result = sweep(tmp_path, server, "-m", "local", env=env)
        requests = server.requests_to("/v1/chat/completions")
    one_error_line(result, "started without LoRA", "prime serve --enable-lora --max-lora-rank 32")
    assert requests == [] and not (tmp_path / "outputs").exists()


def test_local_model_on_a_lora_enabled_prime_serve_and_a_base_model_mismatch_is_said(tmp_path):
    from prime_cli.serve.embedded import EMBEDDED_NAME

    make_weights(tmp_path, steps=(0, 10), base="/elsewhere/Qwen3-0.6B")
    with ScriptedOpenAIServer(reply=reply_by_model) as server:
        env = record_local_server(tmp_path / "cache", server, lora=True, max_lora_rank=16)
        result = sweep(tmp_path, server, env=env)  # -m local is the default model
    assert result.returncode == 0, result.stderr
    runs = runs_by_model(tmp_path)
    assert set(runs) == {EMBEDDED_NAME, "step_0", "step_10"}
    assert runs[EMBEDDED_NAME]["local_model"] and not runs["step_10"]["local_model"]
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and "/elsewhere/Qwen3-0.6B" in warnings[0] and str(tmp_path / "cache" / "model") in warnings[0]
    assert [label for label, cells in table_rows(result.stdout).items() if "<- best" in cells] == ["step_10"]


def test_ctrl_c_ends_the_sweep_after_the_step_in_progress_and_shows_what_was_done(tmp_path):
    import signal
    import time

    from tests.evals.cli_support import popen_prime

    make_weights(tmp_path)
    with ScriptedOpenAIServer(reply=reply_by_model, models=[BASE], delay=0.3) as server:
        proc = popen_prime(["eval", "run", "reverse-text", "--weights-dir", str(tmp_path / "run" / "weights"),
                            "-b", server.url, "-n", "20", "-r", "2", "-c", "2"], tmp_path)
        deadline = time.time() + 60
        while time.time() < deadline and not any(
                r["json"]["model"] == "step_0" for r in server.requests_to("/v1/chat/completions")):
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        loaded = [r["json"]["lora_name"] for r in server.requests_to("/v1/load_lora_adapter")]
    assert proc.returncode == 1
    assert loaded == ["step_0"]  # no step after the interrupted one
    runs = runs_by_model(tmp_path)
    assert runs[BASE]["status"] == "completed" and runs["step_0"]["status"] == "cancelled"
    assert list(table_rows(out)) == ["base", "step_0"]


@pytest.mark.parametrize(("model", "served", "serve"), [
    ("local", True, "prime serve --enable-lora --max-lora-rank 16"),
    ("local-moe", True, "prime serve local-moe --enable-lora --max-lora-rank 16"),
    ("SmolLM2-4x135M-Instruct", False, "prime serve MODEL_FOLDER --enable-lora --max-lora-rank 16"),
])
def test_the_fix_for_a_server_without_runtime_lora_names_what_prime_serve_takes(model, served, serve):
    """`prime serve` takes a built-in name or a folder, never a served model id."""
    from prime_cli.evals.config import EvalConfig, served_locally
    from prime_cli.evals.sweep import _load_fix

    config = EvalConfig(env_id="reverse-text", model=model, base_url="http://127.0.0.1:8001/v1")
    if served:
        config = served_locally(config, "SmolLM2-served-id", "http://127.0.0.1:8001/v1")
    assert f"(or `{serve}`)" in _load_fix(config, 16)
