"""With -n above the dataset size, what ran is said everywhere (issue 54, item 6): the header, metadata.json
`num_examples` and the viewer's size column say 3 examples, not the 20 asked for."""

from __future__ import annotations

from tests.cli.conftest import metadata, run_dirs
from tests.support.cli import run_prime
from tests.support.scripted_server import ScriptedOpenAIServer


def test_n_above_the_dataset_size_records_the_examples_that_ran(tmp_path):
    assert run_prime(["env", "init", "my-env"], tmp_path).returncode == 0  # its dataset has 3 examples
    with ScriptedOpenAIServer() as server:
        result = run_prime(["eval", "run", "my-env", "-m", "scripted-model", "-b", server.url, "-n", "20", "-r", "2",
                            "-s"], tmp_path)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
    header = result.stdout.splitlines()[0]
    assert "3 examples x 2 rollouts = 6 rollouts" in header, header
    assert "my-env has only 3 examples (asked for 20): evaluating all 3" in result.stdout
    [run_dir] = run_dirs(tmp_path)
    meta = metadata(run_dir)
    assert (meta["num_examples"], meta["rollouts_per_example"]) == (3, 2)

    from prime_cli.results.eval_reader import read_entry

    assert read_entry(run_dir).size_text == "3x2"  # the viewer's size column


def test_all_examples_records_their_number_not_minus_one(tmp_path):
    assert run_prime(["env", "init", "my-env"], tmp_path).returncode == 0
    with ScriptedOpenAIServer() as server:
        result = run_prime(["eval", "run", "my-env", "-m", "scripted-model", "-b", server.url, "-n", "-1", "-r", "1",
                            "-s"], tmp_path)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
    assert "3 examples x 1 rollouts = 3 rollouts" in result.stdout.splitlines()[0]
    assert "asked for" not in result.stdout  # -1 asks for all: nothing to explain
    assert metadata(run_dirs(tmp_path)[0])["num_examples"] == 3
