"""Text that would take over a terminal, for the tests that check it is shown as text (`prime_cli.runs.visible`).

EVIL holds a CSI that clears the screen, an OSC that retitles the window (ended by BEL), a C1 CSI
(U+009B) and a lone CR; SHOWN is how it must appear. `write_env` writes a tool-using environment whose
data set, system prompt, task, reward function name and tool output all hold it; `reply` is a scripted
model that calls the tool, then answers with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

EVIL = "\x1b[2J\x1b]0;pwned\x07\x9b31m\rX"
SHOWN = "\\x1b[2J\\x1b]0;pwned\\x07\\x9b31m\\rX"

ENV = '''
import prime_cli.envs as vf

EVIL = "\\x1b[2J\\x1b]0;pwned\\x07\\x9b31m\\rX"


def lookup(query: str) -> str:
    """Look the query up."""
    return f"tool output {EVIL}"


def load_environment(system_prompt: str = f"system {EVIL}", fail: bool = False):
    if fail:
        raise RuntimeError(f"no data here {EVIL}")

    def score(completion, answer) -> float:
        return 0.5

    score.__name__ = f"score{EVIL}"
    rows = [{"question": f"say {EVIL} please", "answer": "a", "task": f"task{EVIL}"},
            {"question": "plain question", "answer": "b", "task": "plain"}]
    return vf.ToolEnv(tools=[lookup], dataset=rows, system_prompt=system_prompt, rubric=vf.Rubric(funcs=[score]),
                      max_turns=3)
'''

PYPROJECT = '''
[project]
name = "evil-env"
version = "0.1.0"

[tool.prime.eval]
num_examples = 2
note = "see \\u001b]0;pwned\\u0007\\u009b here"
'''


def write_env(root: Path) -> None:
    """`root/environments/evil_env/`: the environment `evil-env`."""
    folder = root / "environments" / "evil_env"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "evil_env.py").write_text(ENV)
    (folder / "pyproject.toml").write_text(PYPROJECT)


def reply(request: dict[str, Any]) -> str | dict[str, Any]:
    """A tool call first; once the tool answered, a reply holding EVIL."""
    if any(m.get("role") == "tool" for m in request.get("messages") or []):
        return f"reply {EVIL} done"
    return {"tool_calls": [{"function": {"name": "lookup", "arguments": json.dumps({"query": EVIL})}}]}


def raw_controls(text: str) -> list[str]:
    """The control characters in `text` other than newline and tab (none may reach a terminal raw)."""
    return sorted({repr(c) for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0})
