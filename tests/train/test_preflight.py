"""What `prime train` refuses before anything starts, through the installed script: max_tokens that leaves no
room for a prompt, a model with no weights on this machine, an output directory that is a file. Each is one
`error:` line and exit code 2, from --dry-run and from a real run alike, in about a second, writing nothing.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.environments.conftest import data_root
from tests.evals.cli_support import run_prime
from tests.train.support import MINIMAL, assert_one_error_line, write

ABSENT_MODEL = "prime-tests/no-such-model"


def train(args: list[str], cwd: Path, **env: str):
    """`prime train ARGS` in a subprocess, with an empty Hugging Face cache unless HF_HUB_CACHE is given.
    A real run that got past the checks would start vLLM: the timeout bounds a test that fails that way."""
    env = {"PRIME_DATA_DIR": str(data_root()), "HF_HUB_CACHE": str(cwd / "empty-hf-cache"), **env}
    return run_prime(["train", *args], cwd, env, timeout=60)


def refused_fast(args: list[str], cwd: Path, *fragments: str) -> str:
    """Exit 2 with one `error:` line naming the fragments, within seconds, and no run folder written."""
    started = time.monotonic()
    result = train(args, cwd)
    elapsed = time.monotonic() - started
    line = assert_one_error_line(result, *fragments)
    assert elapsed < 5, f"took {elapsed:.1f}s"
    assert not (cwd / "out").exists() and not (cwd / "outputs").exists()
    return line


MAX_TOKENS_CASES = {
    "above": ("[orchestrator.sampling]\nmax_tokens = 600\n[inference.model]\nmax_model_len = 512\n",
              "orchestrator.sampling.max_tokens (600) must be below inference.model.max_model_len (512)"),
    "seq_len": ("seq_len = 40\n" + "[orchestrator.sampling]\nmax_tokens = 48\n[inference.model]\nmax_model_len = 40\n",
                "orchestrator.sampling.max_tokens (48) must be below inference.model.max_model_len (40)"),
    "equal": ("[orchestrator.sampling]\nmax_tokens = 512\n[inference.model]\nmax_model_len = 512\n",
              "orchestrator.sampling.max_tokens (512) must be below"),
}


def _config(tmp_path: Path, extra: str) -> Path:
    """MINIMAL with `extra`, whose top-level keys (before its first table) go before MINIMAL's tables."""
    top = extra.split("[", 1)[0]
    return write(tmp_path, top + MINIMAL + extra[len(top):])


@pytest.mark.parametrize("case", sorted(MAX_TOKENS_CASES))
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "real-run"])
def test_max_tokens_must_leave_room_for_a_prompt(tmp_path, case, dry_run):
    extra, expected = MAX_TOKENS_CASES[case]
    path = _config(tmp_path, extra)
    line = refused_fast([str(path), "-o", "out", *(["--dry-run"] if dry_run else [])], tmp_path, expected)
    assert "lower max_tokens or raise max_model_len" in line


def test_max_tokens_one_below_max_model_len_is_allowed_and_the_plan_says_what_is_left(tmp_path):
    path = _config(tmp_path, "[orchestrator.sampling]\nmax_tokens = 500\n[inference.model]\nmax_model_len = 512\n")
    result = train([str(path), "--dry-run"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "max_tokens 500 per model call (a call's prompt may use the other 12 of max_model_len 512)" in result.stdout


def test_the_hosted_shape_names_its_own_key(tmp_path):
    path = write(tmp_path, 'model = "local"\nbatch_size = 8\nrollouts_per_example = 4\n[sampling]\nmax_tokens = 4096\n'
                           '[[env]]\nid = "reverse-text"\n')
    refused_fast([str(path), "--dry-run"], tmp_path, "sampling.max_tokens (4096) must be below")


def test_online_eval_max_tokens_of_the_environment_must_leave_room_for_a_prompt(tmp_path):
    """reverse-text's [tool.prime.eval] max_tokens is 128: the online eval samples with it."""
    path = _config(tmp_path, "seq_len = 100\n[orchestrator.sampling]\nmax_tokens = 32\n[inference.model]\n"
                             "max_model_len = 100\n[orchestrator.eval]\ninterval = 1\n")
    refused_fast([str(path), "-o", "out"], tmp_path, "orchestrator.eval: environment 'reverse-text' evaluates with "
                 "max_tokens 128", "inference.model.max_model_len (100)")
    fits = train([str(path), "--dry-run", "--set", "inference.model.max_model_len=200", "--set", "seq_len=200"],
                 tmp_path)
    assert fits.returncode == 0, fits.stderr


def test_a_model_not_in_the_hugging_face_cache_is_refused_by_a_real_run(tmp_path):
    path = _config(tmp_path, f'[model]\nname = "{ABSENT_MODEL}"\n')
    line = refused_fast([str(path), "-o", "out"], tmp_path, f"model.name '{ABSENT_MODEL}'",
                        "not in the local Hugging Face cache", f"hf download {ABSENT_MODEL}")
    assert str(tmp_path / "empty-hf-cache") in line  # where it looked


def test_a_dry_run_notes_a_model_not_in_the_cache(tmp_path):
    """A dry run may check a config meant for another machine: the missing weights are a note, not an error."""
    path = _config(tmp_path, f'[model]\nname = "{ABSENT_MODEL}"\n')
    result = train([str(path), "--dry-run"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"note: a real run on this machine would refuse the model: model.name '{ABSENT_MODEL}'" in result.stdout


def _cache_with(cache: Path, repo_id: str) -> None:
    """A Hugging Face cache holding repo_id's config.json, laid out as huggingface_hub downloads it."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0" * 40)
    (repo / "snapshots" / ("0" * 40)).mkdir(parents=True)
    (repo / "snapshots" / ("0" * 40) / "config.json").write_text("{}")


def test_a_model_in_the_cache_that_HF_HUB_CACHE_names_passes(tmp_path):
    _cache_with(tmp_path / "hub", ABSENT_MODEL)
    path = _config(tmp_path, f'[model]\nname = "{ABSENT_MODEL}"\n')
    result = train([str(path), "--dry-run"], tmp_path, HF_HUB_CACHE=str(tmp_path / "hub"))
    assert result.returncode == 0, result.stderr
    assert "would refuse the model" not in result.stdout


def test_a_model_folder_that_does_not_exist_is_refused(tmp_path):
    path = _config(tmp_path, '[model]\nname = "./models/nope"\n')
    refused_fast([str(path), "-o", "out"], tmp_path, "model.name './models/nope': no such folder")
    (tmp_path / "weights.bin").write_text("x")
    refused_fast([str(path), "-o", "out", "--set", "model.name=weights.bin"], tmp_path,
                 "model.name 'weights.bin' is a file, not a model folder")


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "real-run"])
def test_an_output_dir_that_is_a_file_is_refused(tmp_path, dry_run):
    (tmp_path / "notes.txt").write_text("mine")
    path = write(tmp_path, MINIMAL)
    flags = ["--dry-run"] if dry_run else []
    refused_fast([str(path), "-o", "notes.txt", *flags], tmp_path, "-o/--output-dir notes.txt is a file, not a folder")
    refused_fast([str(path), "-o", "notes.txt/run", *flags], tmp_path,
                 f"-o/--output-dir notes.txt/run: {tmp_path / 'notes.txt'} is a file")
    in_config = write(tmp_path, 'output_dir = "notes.txt"\n' + MINIMAL, "in-config.toml")
    refused_fast([str(in_config), *flags], tmp_path, "output_dir notes.txt is a file", "change output_dir in the config")
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert not (tmp_path / "logs").exists()
