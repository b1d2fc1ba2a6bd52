"""`prime eval run -v` and its summary show what the data set, the model and the environment wrote as text:
control characters (a screen-clearing CSI, a retitling OSC, a C1 CSI, a lone CR) arrive as visible escapes,
never raw. Through the installed `prime`, against a scripted server."""

import json

from tests.evals.cli_support import only_run_dir, run_prime
from tests.support.cli import TerminalSession
from tests.support.scripted_server import ScriptedOpenAIServer
from tests.support.untrusted import EVIL, SHOWN, raw_controls, reply, write_env


def test_verbose_lines_and_summary_escape_control_characters(tmp_path):
    write_env(tmp_path)
    with ScriptedOpenAIServer(reply) as server:
        result = run_prime(["eval", "run", "evil-env", "-m", "m", "-b", server.url, "-n", "2", "-r", "2", "-v"],
                           tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    assert raw_controls(out) == []
    assert f"prompt: say {SHOWN} please" in out  # the data set's row
    assert f"[task{SHOWN}]" in out  # its task
    assert f"tool lookup: tool output {SHOWN}" in out  # the tool's output
    assert f"assistant: reply {SHOWN} done" in out  # the model's reply
    summary = out[out.index("Eval completed"):]
    assert f"score{SHOWN}" in summary and f"task{SHOWN}" in summary  # metric table, per-task table


def test_the_live_display_in_a_terminal_never_writes_the_sequences(tmp_path):
    write_env(tmp_path)
    with ScriptedOpenAIServer(reply) as server, TerminalSession(
            ["eval", "run", "evil-env", "-m", "m", "-b", server.url, "-n", "2", "-r", "1", "-v"], cwd=tmp_path,
            columns=200) as term:
        term.wait_for("Eval summary", timeout=60)
        assert term.wait_exit(timeout=30) == 0
    raw = term.raw.decode("utf-8", errors="replace")
    for sequence in ("\x1b[2J", "\x1b]0;pwned", "\x07", "\x9b", EVIL[-2:]):
        assert sequence not in raw, repr(sequence)
    assert SHOWN in raw.replace("\r\n", "\n")  # shown as text (rich colours the text around it, not inside)


LINE_BREAKS = "a\u2028b\u2029c\x85d\x1ce"  # what str.splitlines() (and JavaScript's readers) end a line on


def test_a_reply_holding_unicode_line_separators_stays_one_line_per_rollout(tmp_path):
    """The store writes JSON with ensure_ascii=False; U+2028, U+2029 and NEL must still be escaped, or
    every reader that splits lines the usual way (str.splitlines, the TUI's index, jq -c users) sees a
    row cut in two. The clean-clone suite caught SmolLM2 writing one."""
    write_env(tmp_path)
    with ScriptedOpenAIServer(lambda request: f"reply {LINE_BREAKS}") as server:
        result = run_prime(["eval", "run", "evil-env", "-m", "m", "-b", server.url, "-n", "2", "-r", "2", "-s"], tmp_path)
    assert result.returncode == 0, result.stderr
    text = only_run_dir(tmp_path).joinpath("results.jsonl").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) == 4
    assert [json.loads(line)["completion"][-1]["content"] for line in lines] == [f"reply {LINE_BREAKS}"] * 4
