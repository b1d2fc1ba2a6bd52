"""`prime train --dry-run` of a config meant for another machine: a judge model whose key is not set here is
a note in the plan (a real run still refuses it, before anything starts); env_file's keys count for the
checks as they do for the run's parts; an environment's data hint is given in the config's spelling."""

from __future__ import annotations

from tests.train.support import assert_one_error_line, run_train, write
from tests.train.test_guide_configs import VERIFIERS_PRIME_RL

# the verifiers guide's wiki-search example, as printed, judged by gpt-4.1-mini
WIKI_GUIDE = VERIFIERS_PRIME_RL

WIKI_HERE = """
model = "local"
batch_size = 8
rollouts_per_example = 4

[[env]]
id = "wiki-search"
args = { judge_model = "gpt-4.1-mini" }
"""

NO_KEY = {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}


def test_the_dry_run_plans_and_notes_the_missing_judge_key(tmp_path):
    result = run_train([str(write(tmp_path, WIKI_GUIDE)), "--dry-run"], cwd=tmp_path, extra_env=NO_KEY)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Plan:" in out and "torchrun --nproc_per_node 4 on GPUs 4,5,6,7" in out and "nothing was started" in out
    notes = [line.strip() for line in out.splitlines() if "OPENAI_API_KEY" in line]
    assert len(notes) == 1 and notes[0].startswith("warning: orchestrator.env[0] (wiki-search): judge model "
                                                   "gpt-4.1-mini"), out
    assert "a real run here refuses it" in notes[0] and "env_file" in notes[0]
    assert out.rstrip().endswith("Dry run: config and trainer are OK, the environments as far as the warnings "
                                 "above say; nothing was started.")
    assert "error" not in result.stderr and "Traceback" not in result.stderr


def test_a_real_run_still_refuses_the_missing_key_before_anything_starts(tmp_path):
    out = tmp_path / "run"
    result = run_train([str(write(tmp_path, WIKI_HERE)), "-o", str(out), "-t", "no-such-trainer"], cwd=tmp_path,
                       extra_env=NO_KEY)
    assert_one_error_line(result, "judge model gpt-4.1-mini", "OPENAI_API_KEY")
    assert not out.exists()


def test_env_file_keys_count_for_the_checks(tmp_path):
    (tmp_path / "secrets.env").write_text("OPENAI_API_KEY=not-a-real-key\n")
    path = write(tmp_path, 'env_file = ["secrets.env"]\n' + WIKI_HERE)
    dry = run_train([str(path), "--dry-run", "-o", str(tmp_path / "run")], cwd=tmp_path, extra_env=NO_KEY)
    assert dry.returncode == 0, dry.stderr
    assert "judge gpt-4.1-mini: OpenAI via LiteLLM, key OPENAI_API_KEY" in dry.stderr
    assert "warning: orchestrator.env[0]" not in dry.stdout and "not-a-real-key" not in dry.stdout + dry.stderr
    real = run_train([str(path), "-o", str(tmp_path / "run"), "-t", "no-such-trainer"], cwd=tmp_path, extra_env=NO_KEY)
    assert real.returncode == 2 and "not set" not in real.stderr and "no-such-trainer" in real.stderr


def test_the_data_hint_is_in_the_configs_spelling(tmp_path):
    path = write(tmp_path, 'model = "local"\nbatch_size = 8\nrollouts_per_example = 4\n[[env]]\nid = "wiki-search"\n')
    result = run_train([str(path), "--dry-run"], cwd=tmp_path, extra_env={"PRIME_DATA_DIR": str(tmp_path / "none")})
    line = assert_one_error_line(result, "wiki-search has no corpus",
                                 'args = { corpus_path = "/path/to/hotpotqa.jsonl" } in orchestrator.env[0]')
    assert "-a '" not in line
