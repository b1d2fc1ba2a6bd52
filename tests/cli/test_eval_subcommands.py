"""The words after `prime eval`: `view` is `tui`; an environment (or a TOML file) means `run`; any other
word is one error line naming the subcommands, never a run."""

from __future__ import annotations

import pytest

from tests.cli.conftest import one_error_line
from tests.support.cli import run_prime

SUBCOMMANDS = ("run", "view", "tui", "export", "compare", "rescore")


def test_view_and_tui_are_both_listed_and_take_the_same_flags(tmp_path):
    listing = run_prime(["eval", "--help"], tmp_path)
    assert listing.returncode == 0, listing.stderr
    commands = [line.split()[0] for line in listing.stdout.splitlines() if line.startswith("  ") and line.split()]
    assert set(SUBCOMMANDS) <= set(commands), listing.stdout
    assert "deprecated" not in listing.stdout.lower() and "moved" not in listing.stdout.lower()
    view, tui = (run_prime(["eval", name, "--help"], tmp_path) for name in ("view", "tui"))
    assert view.returncode == tui.returncode == 0, view.stderr + tui.stderr
    assert "Usage: prime eval view [OPTIONS] [path]" in view.stdout and "--interval" in view.stdout

    def arguments_and_options(text: str) -> str:
        return text[text.index("Arguments:"):]

    assert arguments_and_options(view.stdout) == arguments_and_options(tui.stdout)


def test_view_refuses_a_bad_path_as_tui_does(tmp_path):
    view = one_error_line(run_prime(["eval", "view", "nowhere"], tmp_path), "nowhere")
    tui = one_error_line(run_prime(["eval", "tui", "nowhere"], tmp_path), "nowhere")
    assert view == tui


@pytest.mark.parametrize("args", [["diff", "A", "B"], ["veiw"], ["no-such-env", "-n", "2"]], ids=" ".join)
def test_an_unknown_word_is_an_error_naming_the_subcommands(args, tmp_path):
    result = run_prime(["eval", *args], tmp_path)
    line = one_error_line(result, repr(args[0]), *SUBCOMMANDS)
    assert "Usage:" not in result.stdout + result.stderr and "unexpected extra argument" not in line
    assert "environment" in line  # says why it is not taken for an environment either
    assert not (tmp_path / "outputs").exists()


def test_a_close_word_is_suggested(tmp_path):
    one_error_line(run_prime(["eval", "veiw"], tmp_path), "did you mean 'view'?")


def test_an_environment_a_local_folder_or_a_toml_file_is_still_run(tmp_path):
    """The shorthand `prime eval ENV` stays `prime eval run ENV` (the bad -n shows it reached run)."""
    installed = run_prime(["eval", "reverse-text", "-m", "x", "-b", "http://127.0.0.1:9/v1", "-n", "-3"], tmp_path)
    one_error_line(installed, "-n/--num-examples")
    local = tmp_path / "environments" / "my_thing"
    local.mkdir(parents=True)
    (local / "my_thing.py").write_text("def load_environment():\n    raise SystemExit('not reached')\n")
    one_error_line(run_prime(["eval", "my-thing", "-m", "x", "-b", "http://127.0.0.1:9/v1", "-n", "-3"], tmp_path),
                   "-n/--num-examples")
    one_error_line(run_prime(["eval", "missing.toml"], tmp_path), "missing.toml does not exist")
