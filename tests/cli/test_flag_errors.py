"""Every flag of `prime eval run`, `prime gepa run`, `prime train`, `prime eval export`, `prime eval compare`,
`prime eval rescore`, `prime env check` and the viewer, given a bad value: exit 2 and one `error:` line on
stderr that names the flag as the user types it (`-n/--num-examples must be ...`), without pydantic's words
("Value error", "Input should be") or a
traceback. The table must name every option of those commands (read from the commands themselves),
so a new flag cannot be added without its bad value here.

The bulk runs in this process through `prime_cli.cli.main.main` (the console script's function:
the same argument handling, one process); a few go through the installed `prime` in a subprocess.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.environments.conftest import data_root
from tests.support.cli import main_in_process, run_prime
from tests.train.support import MINIMAL

URL = "http://127.0.0.1:9/v1"  # nothing listens: a bad value that is not refused would end as 'cannot reach'
UNSET = "PRIME_TEST_UNSET_KEY_VAR"
EVAL = ["eval", "run", "reverse-text", "-m", "x", "-b", URL]
GEPA = ["gepa", "run", "reverse-text", "-m", "x", "-b", URL]
# placeholders filled in per test: a config, a file that is not a folder, a saved eval run
CONFIG, A_FILE, RUN = "<config>", "<file>", "<run>"
TRAIN = ["train", CONFIG, "--dry-run"]
EXPORT = ["eval", "export", RUN]

BAD: dict[tuple[str, ...], dict[str, list[str]]] = {
    ("eval", "run"): {
        "-m": ["eval", "run", "reverse-text", "-m", "nosuch"],
        "-b": ["eval", "run", "reverse-text", "-m", "x", "-b", "localhost:8000"],
        "-k": [*EVAL, "-k", UNSET],
        "-e": [*EVAL, "-e", "missing.toml"],
        "-n": [*EVAL, "-n", "-3"],
        "-r": [*EVAL, "-r", "0"],
        "-c": [*EVAL, "-c", "0"],
        "-t": [*EVAL, "-t", "0"],
        "-T": [*EVAL, "-T", "-1"],
        "-S": [*EVAL, "-S", "[1]"],
        "-a": [*EVAL, "-a", "{bad"],
        "-x": [*EVAL, "-x", "[1]"],
        "-C": [*EVAL, "-C", "trajectory,rollout_idx"],
        "-R": [*EVAL, "-R", "nowhere"],
        "--retry-errors": [*EVAL, "--retry-errors", "nowhere"],
        "-o": [*EVAL, "-s", "-o", A_FILE],
        "--header": [*EVAL, "--header", "no-colon"],
        "--max-retries": [*EVAL, "--max-retries", "-1"],
        "--timeout": [*EVAL, "--timeout", "0"],
        "--seed": [*EVAL, "--seed", "one"],
        "--pass-threshold": [*EVAL, "--pass-threshold", "high"],
        "--max-error-rate": [*EVAL, "--max-error-rate", "10"],
        "--power": [*EVAL, "--power", "0"],
        "--max-cost": [*EVAL, "--max-cost", "-1"],
        "--sandbox": [*EVAL, "--sandbox", "lxc"],
        "--weights-dir": [*EVAL, "--weights-dir", "nowhere"],
        "--steps": [*EVAL, "--weights-dir", "nowhere", "--steps", "ten"],
    },
    ("gepa", "run"): {
        "-m": ["gepa", "run", "reverse-text", "-m", "nosuch"],
        "-M": [*GEPA, "-M", "litellm/nope"],
        "-b": ["gepa", "run", "reverse-text", "-m", "x", "-b", "localhost:8000"],
        "--reflection-base-url": [*GEPA, "--reflection-base-url", "localhost:8001"],
        "-k": [*GEPA, "-k", UNSET],
        "-e": [*GEPA, "-e", "missing.toml"],
        "-B": [*GEPA, "-B", "0"],
        "--max-cost": [*GEPA, "--max-cost", "0"],
        "-n": [*GEPA, "-n", "0"],
        "-N": [*GEPA, "-N", "0"],
        "--num-test": [*GEPA, "--num-test", "-1"],
        "--minibatch-size": [*GEPA, "--minibatch-size", "0"],
        "-r": [*GEPA, "-r", "0"],
        "--perfect-score": [*GEPA, "--perfect-score", "all"],
        "-c": [*GEPA, "-c", "0"],
        "-P": [*GEPA, "-P", "0"],
        "--speculate": [*GEPA, "--speculate", "-1"],
        "--seed": [*GEPA, "--seed", "one"],
        "-o": [*GEPA, "-o", A_FILE],
        "-R": [*GEPA, "-R", "nowhere"],
        "-a": [*GEPA, "-a", "{bad"],
        "-t": [*GEPA, "-t", "0"],
        "-T": [*GEPA, "-T", "-1"],
        "-S": [*GEPA, "-S", "[1]"],
        "--reflection-sampling-args": [*GEPA, "--reflection-sampling-args", "[1]"],
        "--max-reflection-failures": [*GEPA, "--max-reflection-failures", "0"],
        "--max-retries": [*GEPA, "--max-retries", "-1"],
        "--timeout": [*GEPA, "--timeout", "0"],
    },
    ("train",): {
        "--trainer": [*TRAIN, "--trainer", "nope"],
        "--resume-step": [*TRAIN, "--resume-step", "0"],
        "--set": [*TRAIN, "--set", "max_steps=-1"],
        "-o": [*TRAIN, "-o", A_FILE],
        "--part": [*TRAIN, "--part", "bogus"],
        "--node-rank": [*TRAIN, "--node-rank", "-1"],
        "--slurm-template": [*TRAIN, "--slurm-template", "no-such.j2"],
    },
    ("eval", "export"): {
        "-f": [*EXPORT, "-f", "xlsx"],
        "-o": [*EXPORT, "-o", "no-such-folder/run.csv"],
    },
    ("env", "check"): {
        "-a": ["env", "check", "reverse-text", "-a", "{bad"],
        "-n": ["env", "check", "reverse-text", "-n", "-3"],
        "-m": ["env", "check", "reverse-text", "-m", "nosuch"],
        "-b": ["env", "check", "reverse-text", "-m", "x", "-b", "localhost:8000"],
        "-k": ["env", "check", "reverse-text", "-m", "x", "-b", URL, "-k", UNSET],
        "-e": ["env", "check", "reverse-text", "-m", "x", "-e", "missing.toml"],
        "--max-retries": ["env", "check", "reverse-text", "-m", "x", "-b", URL, "--max-retries", "-1"],
    },
    ("eval", "compare"): {"--power": ["eval", "compare", RUN, RUN, "--power", "0"]},
    ("eval", "rescore"): {
        "-a": ["eval", "rescore", RUN, "-a", "{bad"],
        "-o": ["eval", "rescore", RUN, "-o", A_FILE],
        "-R": ["eval", "rescore", RUN, "-R", "nowhere"],
        "-c": ["eval", "rescore", RUN, "-c", "0"],
    },
    ("eval", "view"): {"--interval": ["eval", "view", "--interval", "0"]},
    ("eval", "tui"): {"--interval": ["eval", "tui", "--interval", "0"]},
}
# options that take any value, and why
NO_BAD_VALUE: dict[tuple[str, ...], dict[str, str]] = {
    ("gepa", "run"): {"--state-columns": "any rollout-state key may be shown to the reflection model; "
                                         "one a rollout lacks is left out"},
}
# extra bad values of flags above, each its own case
MORE = [
    ("--set", [*TRAIN, "--set", "orchestrator.batch_size=0"]),
    ("--set", [*TRAIN, "--set", "max_steps"]),
    ("-n", [*EVAL, "-n", "many"]),
    ("--num-examples", [*EVAL, "--num-examples", "-3"]),
    ("--max-concurrent", [*EVAL, "--max-concurrent", "0"]),
    ("--timeout", [*EVAL, "--timeout", "-5"]),
    ("-n", ["env", "check", "reverse-text", "-n", "all"]),
    ("-b", ["env", "check", "reverse-text", "-b", URL]),  # a judge flag without -m
]


def command(path: tuple[str, ...]):
    import typer

    from prime_cli.cli.main import app

    node = typer.main.get_command(app)
    for name in path:
        node = node.commands[name]
    return node


def value_options(path: tuple[str, ...]):
    """The options of a command that take a value (not --help, not on/off flags)."""
    return [p for p in command(path).params
            if p.param_type_name == "option" and not p.is_flag and "--help" not in p.opts]


def spellings(path: tuple[str, ...], flag: str) -> list[str]:
    for option in value_options(path):
        if flag in option.opts:
            return list(option.opts)
    raise AssertionError(f"{flag} is not an option of prime {' '.join(path)}")


def test_the_table_names_every_option_of_every_command():
    for path, table in BAD.items():
        options = {tuple(o.opts) for o in value_options(path)}
        covered = {tuple(spellings(path, flag)) for flag in [*table, *NO_BAD_VALUE.get(path, ())]}
        assert options == covered, (path, options - covered)


CASES = [(path, flag, args) for path, table in BAD.items() for flag, args in table.items()]
CASES += [(next(p for p in BAD if args[:len(p)] == list(p)), flag, args) for flag, args in MORE]


@pytest.fixture
def placeholders(tmp_path: Path, monkeypatch) -> dict[str, str]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(UNSET, raising=False)
    monkeypatch.setenv("PRIME_DATA_DIR", str(data_root()))
    monkeypatch.setenv("PRIME_CACHE_DIR", str(tmp_path / "cache"))  # no `prime serve` record is found
    config = tmp_path / "config.toml"
    config.write_text(MINIMAL)
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "metadata.json").write_text('{"env_id": "reverse-text", "model": "x", "status": "completed"}')
    (run / "results.jsonl").write_text('{"example_id": 0, "rollout_idx": 0, "reward": 1.0}\n')
    return {CONFIG: str(config), A_FILE: str(a_file), RUN: str(run)}


def filled(args: list[str], places: dict[str, str]) -> list[str]:
    return [places.get(arg, arg) for arg in args]


def check_line(path: tuple[str, ...], flag: str, code: int, out: str, err: str) -> str:
    assert code == 2, (code, out[-2000:], err[-2000:])
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err[-3000:]
    line = lines[0]
    for word in ("Value error", "Input should be", "Traceback", "command line:", "Usage:", "Invalid value for"):
        assert word not in line + out, (word, line)
    names = "|".join(re.escape(s) for s in spellings(path, flag))
    assert re.search(rf"(?<![\w-])({names})(?![\w-])", line), f"{flag} is not named: {line}"
    return line


@pytest.mark.parametrize(("path", "flag", "args"), CASES, ids=[" ".join(c[2]) for c in CASES])
def test_a_bad_value_is_one_line_naming_the_flag(path, flag, args, placeholders, capsys):
    check_line(path, flag, *main_in_process(filled(args, placeholders), capsys))


def test_the_messages_say_what_the_value_must_be(placeholders, capsys):
    def line(args: list[str]) -> str:
        path = ("train",) if args[0] == "train" else tuple(args[:2])
        return check_line(path, args[-2], *main_in_process(filled(args, placeholders), capsys))

    assert line([*EVAL, "-n", "-3"]) == "error: -n/--num-examples must be a positive number, or -1 for all (got -3)"
    assert line([*EVAL, "-c", "0"]) == "error: -c/--max-concurrent must be at least 1 (got 0)"
    assert line([*GEPA, "-B", "0"]) == "error: -B/--max-calls must be at least 1 (got 0)"
    assert line([*EVAL, "-n", "many"]) == "error: -n/--num-examples must be a whole number (got 'many')"
    assert line([*TRAIN, "--resume-step", "0"]) == "error: --resume-step/--trainer.ckpt.resume-step must be at least 1 (got 0)"


SUBPROCESS_CASES = [
    (("eval", "run"), "-n", [*EVAL, "-n", "-3"]),
    (("eval", "run"), "--num-examples", ["eval", "reverse-text", "-m", "x", "-b", URL, "--num-examples", "0"]),
    (("gepa", "run"), "-c", [*GEPA, "-c", "0"]),
    (("train",), "--resume-step", ["train", CONFIG, "--resume-step", "0"]),
    (("eval", "export"), "-f", [*EXPORT, "-f", "xlsx"]),
]


@pytest.mark.parametrize(("path", "flag", "args"), SUBPROCESS_CASES, ids=[" ".join(c[2]) for c in SUBPROCESS_CASES])
def test_the_installed_prime_says_the_same(path, flag, args, placeholders, tmp_path):
    result = run_prime(filled(args, placeholders), tmp_path, {"PRIME_DATA_DIR": str(data_root())})
    check_line(path, flag, result.returncode, result.stdout, result.stderr)


def test_a_flag_over_a_toml_config_is_named_and_the_files_own_key_too(tmp_path):
    config = tmp_path / "evals.toml"
    config.write_text(f'model = "x"\nbase_url = "{URL}"\n[[eval]]\nenv_id = "reverse-text"\n')
    flag = run_prime(["eval", "run", str(config), "-r", "0"], tmp_path)
    assert check_line(("eval", "run"), "-r", flag.returncode, flag.stdout, flag.stderr) == (
        "error: -r/--rollouts-per-example must be at least 1 (got 0)")
    config.write_text(config.read_text() + "rollouts_per_example = 0\n")
    key = run_prime(["eval", "run", str(config)], tmp_path)
    assert key.returncode == 2
    assert key.stderr.strip() == (f"error: {config} [[eval]] #1: rollouts_per_example must be at least 1 (got 0)")
