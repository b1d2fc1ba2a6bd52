"""The docs say what `prime lab setup --prime-rl` writes, and one measured time for the CPU training run."""

from __future__ import annotations

import re

from prime_cli.train.plan_size import CPU_MINUTES
from tests.evals.cli_support import REPO, run_prime


def test_the_prime_rl_line_names_everything_it_writes(tmp_path):
    assert run_prime(["lab", "setup", "--prime-rl"], tmp_path).returncode == 0
    written = {p.name + ("/" if p.is_dir() else "") for p in tmp_path.iterdir() if p.name != ".prime"}
    written |= {f"configs/{p.name}" + ("/" if p.is_dir() else "") for p in (tmp_path / "configs").iterdir()}
    written.discard("configs/")
    line = next(line for line in (REPO / "docs" / "environments.md").read_text().splitlines()
                if line.startswith("prime lab setup --prime-rl"))
    assert all(name in line for name in written), (written, line)


def test_readme_and_training_guide_give_the_measured_cpu_time():
    readme = (REPO / "README.md").read_text()
    training = (REPO / "docs" / "training.md").read_text()
    sentence = re.search(r"reverse-text-cpu\.toml` trains SmolLM2 .*?\n.*?\n", readme)[0]
    line = next(line for line in training.splitlines()
                if re.match(r"prime train configs/rl/reverse-text-cpu\.toml +#", line))
    for text in (sentence, line):
        assert f"{CPU_MINUTES:g} minutes" in text, text


def test_the_training_guide_says_where_orchestrator_stdout_is():
    training = (REPO / "docs" / "training.md").read_text()
    assert re.search(r"`orchestrator\.stdout`[^.]*`OUT/logs/orchestrator\.log`", training)
