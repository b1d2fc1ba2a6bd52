"""GEPA's printed lines show what the models wrote as text: a best prompt, an error or a rejection reason
holding terminal control characters arrives with them escaped, and the `Use it:` command still gives
`prime eval run` the exact prompt."""

import io
import json
import shlex

from prime_cli.gepa.display import PlainDisplay, RichDisplay
from tests.evals.cli_support import run_prime
from tests.gepa import support
from tests.support.scripted_server import ScriptedOpenAIServer
from tests.support.untrusted import EVIL, SHOWN, raw_controls


def reply(body):
    messages = body["messages"]
    if body["model"] == "reflector":  # the reflection model's new prompt carries the sequences
        text = support.reflector_reply(messages, None, None)
        end = text.rindex("\n```")  # the closing fence
        return text[:end] + f"\nMind {EVIL} this." + text[end:]
    return support.student_reply(messages, None, None)


def test_best_prompt_and_use_it_command_escape_control_characters(tmp_path):
    support.write_toy_env(tmp_path)
    with ScriptedOpenAIServer(reply) as server:
        result = run_prime(["gepa", "run", "toy-gepa", "-m", "student", "-M", "reflector", "-b", server.url,
                            "-n", "20", "-N", "10", "-B", "150", "--plain"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert raw_controls(result.stdout + result.stderr) == []
    path = next((tmp_path / "environments" / "toy_gepa" / "outputs" / "gepa").rglob("best_prompt.txt"))
    best = path.read_bytes().decode("utf-8")
    kept = EVIL.split("\r")[0]  # GEPA reads a reply line by line: the CR ends a line there
    assert kept in best  # the file keeps the prompt as the model wrote it
    assert f"Mind {SHOWN.split(chr(92) + 'r')[0]}" in result.stdout  # the printed prompt shows it escaped
    command = next(line for line in result.stdout.splitlines() if line.startswith("Use it: "))
    args = shlex.split(command.removeprefix("Use it: "))
    assert json.loads(args[args.index("-a") + 1])["system_prompt"] == best  # and the command passes it exactly


def line(reason: str) -> dict:
    return {"line": {"iteration": 1, "parent_idx": 0, "accepted": False, "reason": reason, "child_idx": None},
            "used": 10, "max_calls": 100, "best_score": 0.5, "best_idx": 0, "seed_score": 0.5, "candidates": 1,
            "in_flight": 0}


def test_plain_and_live_lines_escape_reasons_and_messages():
    stream = io.StringIO()
    display = PlainDisplay(stream)
    display.start(env_id="toy", model="m", reflector="r", max_calls=100)
    display.update(**line(f"reflection failed: server said {EVIL}"))
    display.message(f"warning from the server: {EVIL}", "warning")
    assert raw_controls(stream.getvalue()) == [] and f"server said {SHOWN}" in stream.getvalue()
    assert f"warning from the server: {SHOWN}" in stream.getvalue()

    from rich.console import Console

    out = io.StringIO()
    live = RichDisplay(Console(file=out, force_terminal=False, width=200))
    live.start(env_id="toy", model="m", reflector="r", max_calls=100)
    live.update(**line(f"reflection failed: server said {EVIL}"))
    live.message(f"warning from the server: {EVIL}", "warning")
    live.console.print(live._panel())  # the live panel, with the last proposal's verdict
    assert raw_controls(out.getvalue()) == [] and f"server said {SHOWN}" in out.getvalue()
