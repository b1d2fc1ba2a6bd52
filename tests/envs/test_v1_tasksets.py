"""verifiers' v1 tasksets under `prime eval run` (issue 58): the installed `prime` script on small tasksets
written here as a user writes them (`import verifiers.v1 as vf`), against a scripted server."""

from __future__ import annotations

import hashlib
import json
import textwrap
from difflib import SequenceMatcher
from pathlib import Path

import pytest

from tests.evals.cli_support import only_run_dir, read_rows, run_prime
from tests.support.scripted_server import ScriptedOpenAIServer

TEXTS = ["hello world", "abc def", "prime intellect", "reverse me"]
REVERSE = '''
import re
from difflib import SequenceMatcher

import verifiers.v1 as vf

TAG = re.compile(r"<reversed_text>(.*?)</reversed_text>", re.DOTALL)
TEXTS = {texts!r}


class RevData(vf.TaskData):
    answer: str


class RevTask(vf.Task[RevData]):
    @vf.stop
    async def single_turn(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def lcs(self, trace: vf.Trace) -> float:
        match = TAG.search(trace.last_reply or "")
        return SequenceMatcher(None, match.group(1).strip() if match else "", self.data.answer).ratio()

    @vf.metric
    async def reply_chars(self, trace: vf.Trace) -> float:
        return float(len(trace.last_reply))


class RevConfig(vf.TasksetConfig):
    count: int = 4


class RevTaskset(vf.Taskset[RevTask, RevConfig]):
    def load(self) -> list[RevTask]:
        return [RevTask(RevData(prompt=t, system_prompt="Reverse the text in <reversed_text> tags.", answer=t[::-1]),
                        self.config.task) for t in TEXTS[: self.config.count]]
'''


def write_env(root: Path, name: str, body: str, src_layout: bool = False) -> None:
    folder = root / "environments" / name
    package = (folder / "src" / name) if src_layout else (folder / name)
    package.mkdir(parents=True)
    (folder / "pyproject.toml").write_text(f'[project]\nname = "{name.replace("_", "-")}"\nversion = "0.1.0"\n')
    (package / "taskset.py").write_text(textwrap.dedent(body))
    exported = [line.split()[1].split("(")[0] for line in body.splitlines()
                if line.startswith("class ") and "vf.Taskset[" in line]
    (package / "__init__.py").write_text(f"from {name}.taskset import {', '.join(exported)}\n\n__all__ = {exported!r}\n")


def half_right(body: dict) -> str:
    """The reversal for texts of odd length, the text unchanged for the others."""
    text = body["messages"][-1]["content"]
    return f"<reversed_text>{text[::-1] if len(text) % 2 else text}</reversed_text>"


def test_a_v1_taskset_in_a_src_layout_runs_with_its_rewards_metrics_stop_and_task_keys(tmp_path: Path) -> None:
    write_env(tmp_path, "rev_v1", REVERSE.format(texts=TEXTS), src_layout=True)
    with ScriptedOpenAIServer(half_right) as server:
        result = run_prime(["eval", "run", "rev-v1", "-m", "m", "-b", server.url, "-n", "4", "-r", "2", "-s"], tmp_path)
        chats = server.requests_to("/v1/chat/completions")
    assert result.returncode == 0, result.stderr
    rows = read_rows(only_run_dir(tmp_path))
    assert len(rows) == 8 == len(chats)  # one model call per rollout: the @vf.stop held after the first reply
    assert chats[0]["json"]["messages"][0] == {"role": "system", "content": "Reverse the text in <reversed_text> tags."}
    for row in rows:
        text = TEXTS[int(row["example_id"])]
        expected = 1.0 if len(text) % 2 else SequenceMatcher(None, text, text[::-1]).ratio()
        assert row["reward"] == pytest.approx(expected) and row["metrics"]["lcs"] == pytest.approx(expected)
        assert row["metrics"]["reply_chars"] == len(f"<reversed_text>{text}</reversed_text>")
        assert row["stop_condition"] == "single_turn"
        data = {"idx": int(row["example_id"]), "prompt": text, "system_prompt": "Reverse the text in <reversed_text> tags.",
                "skills": [], "network_allow": ["*"], "network_block": [], "artifacts": [],
                "artifact_max_bytes": 32 * 1024 * 1024, "timeout": {}, "resources": {}, "answer": text[::-1]}
        key = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()  # verifiers' task key
        assert row["info"]["task_key"] == key == row["info"]["task_hash"]


TOOLS = '''
import asyncio

import verifiers.v1 as vf

FACTS = {"ada lovelace": "wrote the first program", "alan turing": "defined computability"}


class Facts(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = "facts"

    @vf.tool
    def lookup(self, name: str) -> str:
        """Look up what a person is known for."""
        return FACTS.get(name.strip().lower(), "no entry found")


class PadState(vf.State):
    slot: str = ""


class Pad(vf.Toolset[vf.SharedToolsetConfig, PadState]):
    TOOL_PREFIX = "pad"

    @vf.tool
    async def roundtrip(self, word: str) -> str:
        """Store a word, then read it back."""
        self.state.slot = word
        await asyncio.sleep(0.2)
        return self.state.slot


class FactData(vf.TaskData):
    answer: str
    person: str


class FactTask(vf.Task[FactData]):
    @classmethod
    def toolsets(cls, config):
        return [Facts()]

    @vf.reward
    async def found(self, trace: vf.Trace) -> float:
        return float(self.data.answer in trace.last_reply)

    @vf.reward(weight=0.5)
    async def own_word(self, trace: vf.Trace) -> float:
        results = [m.content for m in trace.tool_messages]
        return float(f"word-{self.data.idx}" in results)


class FactTaskset(vf.Taskset[FactTask, vf.TasksetConfig]):
    @classmethod
    def toolsets(cls, config):
        return [Pad()]

    def load(self):
        return [FactTask(FactData(prompt=f"What is {p} known for? Use the tools.", answer=a, person=p))
                for p, a in FACTS.items()]
'''


def tool_player(body: dict) -> str | dict:
    """Calls facts_lookup and pad_roundtrip (with its example's own word) first, then answers with the fact."""
    messages = body["messages"]
    tool_results = [m for m in messages if m["role"] == "tool"]
    if not tool_results:
        person = messages[-1]["content"].split("What is ")[1].split(" known")[0]
        example = 0 if person == "ada lovelace" else 1
        return {"tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "facts_lookup", "arguments": json.dumps({"name": person})}},
            {"id": "b", "type": "function", "function": {"name": "pad_roundtrip",
                                                         "arguments": json.dumps({"word": f"word-{example}"})}}]}
    return f"It {tool_results[0]['content']}."


def test_toolsets_tools_are_offered_called_in_process_and_a_shared_toolset_keeps_each_rollouts_state(tmp_path):
    write_env(tmp_path, "facts_v1", TOOLS)
    with ScriptedOpenAIServer(tool_player) as server:
        result = run_prime(["eval", "run", "facts-v1", "-m", "m", "-b", server.url, "-n", "2", "-r", "4", "-s"], tmp_path)
        chats = server.requests_to("/v1/chat/completions")
    assert result.returncode == 0, result.stderr
    offered = sorted(t["function"]["name"] for t in chats[0]["json"]["tools"])
    assert offered == ["facts_lookup", "pad_roundtrip"]
    assert chats[0]["json"]["tools"][0]["function"]["parameters"]["required"] in (["name"], ["word"])
    rows = read_rows(only_run_dir(tmp_path))
    assert len(rows) == 8 and len(chats) == 16  # a tool turn, then the answer
    # eight rollouts at once share one Pad; each reads back its own word (its example's) after the others wrote
    assert all(row["reward"] == 1.5 and row["stop_condition"] == "no_tool_calls" for row in rows), rows


INFINITE = '''
import verifiers.v1 as vf


class CountTask(vf.Task[vf.TaskData]):
    @vf.reward
    async def said_number(self, trace: vf.Trace) -> float:
        return float(str(self.data.idx) in trace.last_reply)


class CountConfig(vf.TasksetConfig):
    start: int = 0


class CountTaskset(vf.Taskset[CountTask, CountConfig]):
    INFINITE = True

    def load(self):
        n = self.config.start
        while True:
            yield CountTask(vf.TaskData(prompt=f"Say {n}."))
            n += 1
'''


def test_an_infinite_taskset_needs_n_and_reads_only_that_far_and_bad_config_is_one_line(tmp_path):
    write_env(tmp_path, "count_v1", INFINITE)
    with ScriptedOpenAIServer(lambda body: body["messages"][-1]["content"]) as server:
        unbounded = run_prime(["eval", "run", "count-v1", "-m", "m", "-b", server.url, "-n", "-1"], tmp_path)
        typo = run_prime(["eval", "run", "count-v1", "-m", "m", "-b", server.url, "-n", "2", "-a", '{"strat": 3}'], tmp_path)
        bounded = run_prime(["eval", "run", "count-v1", "-m", "m", "-b", server.url, "-n", "3", "-r", "1", "-s"], tmp_path)
    assert unbounded.returncode == 2 and "is infinite" in unbounded.stderr and "-n" in unbounded.stderr
    assert "Traceback" not in unbounded.stderr
    assert typo.returncode == 2 and "strat" in typo.stderr and "Traceback" not in typo.stderr
    assert bounded.returncode == 0, bounded.stderr
    rows = read_rows(only_run_dir(tmp_path))
    assert sorted(int(r["example_id"]) for r in rows) == [0, 1, 2] and all(r["reward"] == 1.0 for r in rows)


UNSUPPORTED = '''
import verifiers.v1 as vf


class DuelEnv(vf.Env):
    pass


class SortTaskset(vf.Taskset[vf.Task, vf.TasksetConfig]):
    def load(self):
        return []
'''

FAILING = '''
import verifiers.v1 as vf


class FlakyTask(vf.Task[vf.TaskData]):
    @vf.reward
    async def broken(self, trace: vf.Trace) -> float:
        if self.data.idx == 1:
            raise ValueError("no answer to compare with")
        return 1.0


class FlakyTaskset(vf.Taskset[FlakyTask, vf.TasksetConfig]):
    def load(self):
        return [FlakyTask(vf.TaskData(prompt=f"Row {i}.")) for i in range(2)]
'''


def test_what_prime_does_not_run_is_refused_in_one_line_and_a_failing_reward_is_an_error_not_a_zero(tmp_path):
    write_env(tmp_path, "sort_v1", UNSUPPORTED)
    write_env(tmp_path, "flaky_v1", FAILING)
    with ScriptedOpenAIServer(lambda body: "ok") as server:
        refused = run_prime(["eval", "run", "sort-v1", "-m", "m", "-b", server.url, "-n", "1"], tmp_path)
        flaky = run_prime(["eval", "run", "flaky-v1", "-m", "m", "-b", server.url, "-n", "2", "-r", "1", "-s"], tmp_path)
    assert refused.returncode == 2 and "verifiers.v1.Env (an environment with several agent seats" in refused.stderr
    assert "not supported by prime yet" in refused.stderr and "Traceback" not in refused.stderr
    # one of two rollouts errored: above the error budget (exit 1), the rows kept
    assert flaky.returncode == 1 and "1 of 2 rollouts (50.0%) errored" in flaky.stdout, flaky.stdout + flaky.stderr
    rows = {int(r["example_id"]): r for r in read_rows(only_run_dir(tmp_path))}
    assert rows[0]["reward"] == 1.0 and not rows[0]["error"]
    assert rows[1]["reward"] is None and "'broken' raised ValueError: no answer to compare with" in rows[1]["error"]["message"]


IN_RUNTIME = '''
import verifiers.v1 as vf

VERIFY = """# /// script
# dependencies = ["pydantic"]
# ///
import os, sys
import pydantic  # a dependency prime's Python has
print(os.getuid() != 0 and os.path.exists("/sandbox/setup.txt"))
print(1.0 if sys.argv[1].strip() == sys.argv[2].strip() else 0.0)
"""
NEEDS_MISSING = """# /// script
# dependencies = ["surely-not-installed-anywhere-pkg>=1"]
# ///
print(1.0)
"""


class BoxData(vf.TaskData):
    answer: str


class BoxTask(vf.Task[BoxData]):
    async def setup(self, runtime: vf.Runtime) -> None:
        await runtime.write("setup.txt", b"ready")

    @vf.reward
    async def correct(self, trace: vf.Trace, runtime: vf.Runtime) -> float:
        script = NEEDS_MISSING if self.data.answer == "missing" else VERIFY
        result = await runtime.run_uv_script(script, args=[self.data.answer, trace.last_reply])
        if result.exit_code != 0:
            raise RuntimeError(f"verify failed: {result.stderr.strip()[-300:]}")
        sandboxed, score = result.stdout.split()
        assert sandboxed == "True", "the script ran outside the sandbox"
        return float(score)

    @vf.metric
    async def setup_seen(self, trace: vf.Trace, runtime: vf.Runtime) -> float:
        return float(await runtime.read("setup.txt") == b"ready")


class BoxTaskset(vf.Taskset[BoxTask, vf.TasksetConfig]):
    def load(self):
        return [BoxTask(BoxData(prompt=f"Say {a}.", answer=a)) for a in ("42", "7", "missing")]
'''


def test_a_task_that_asks_for_a_runtime_gets_a_sandbox_for_its_setup_and_rewards(tmp_path):
    write_env(tmp_path, "box_v1", IN_RUNTIME)
    with ScriptedOpenAIServer(lambda body: "42") as server:
        result = run_prime(["eval", "run", "box-v1", "-m", "m", "-b", server.url, "-n", "3", "-r", "1", "-s"], tmp_path,
                           timeout=300)
    rows = {int(r["example_id"]): r for r in read_rows(only_run_dir(tmp_path))}
    assert len(rows) == 3, result.stdout + result.stderr
    assert rows[0]["reward"] == 1.0 and rows[0]["metrics"]["setup_seen"] == 1.0  # a file setup wrote, read back
    assert rows[1]["reward"] == 0.0 and rows[1]["metrics"]["setup_seen"] == 1.0
    # a script dependency prime's Python lacks: one line naming it and the fix; an error, never a zero
    assert rows[2]["reward"] is None and "surely-not-installed-anywhere-pkg" in rows[2]["error"]["message"]
    assert "pip install surely-not-installed-anywhere-pkg" in rows[2]["error"]["message"]


def test_env_init_v1_scaffolds_a_taskset_that_runs_and_scores(tmp_path: Path) -> None:
    init = run_prime(["env", "init", "my-tasks", "--v1"], tmp_path)
    assert init.returncode == 0, init.stderr
    package = tmp_path / "environments" / "my_tasks" / "my_tasks"
    assert (package / "taskset.py").is_file() and "MyTasksTaskset" in (package / "__init__.py").read_text()
    answers = {"What is 2 + 3?": "5", "What is the capital of France?": "Paris", "How many legs does a spider have?": "8"}
    with ScriptedOpenAIServer(lambda body: f"<answer>{answers[body['messages'][-1]['content']]}</answer>") as server:
        result = run_prime(["eval", "run", "my-tasks", "-m", "m", "-b", server.url, "-s", "-a", '{"count": 2}'], tmp_path)
    assert result.returncode == 0, result.stderr
    rows = read_rows(only_run_dir(tmp_path))
    assert {int(r["example_id"]) for r in rows} == {0, 1} and all(r["reward"] == 1.0 for r in rows)
    assert all(r["stop_condition"] == "answered" and r["metrics"]["reply_chars"] > 0 for r in rows)


EPISODES = '''
import verifiers.v1 as vf


class ListData(vf.TaskData):
    info: dict


class ListTask(vf.Task[ListData]):
    @vf.stop
    async def said_stop(self, trace: vf.Trace) -> bool:
        return "STOP" in trace.last_reply

    @vf.reward
    async def every_turn(self, trace: vf.Trace) -> float:
        replies = [m.content for m in trace.assistant_messages]
        return float(replies == [t.upper() for t in self.data.info["turns"][: len(replies)]]) * len(replies) / 3


class ListEnv(vf.SingleAgentEnv):
    async def run(self, task, agents):
        async with agents.agent.interaction(task) as interaction:
            for turn in task.data.info["turns"]:
                if (await interaction.turn(turn)).terminated:
                    break


class ListTaskset(vf.Taskset[ListTask, vf.TasksetConfig]):
    def load(self):
        return [ListTask(ListData(prompt=None, info={"turns": turns}))
                for turns in (["a", "b", "c"], ["x", "stop", "never"])]
'''


def test_an_environments_run_drives_a_prompt_less_task_turn_by_turn_until_a_stop(tmp_path):
    write_env(tmp_path, "list_v1", EPISODES)
    (tmp_path / "environments" / "list_v1" / "list_v1" / "__init__.py").write_text(
        "from list_v1.taskset import ListEnv, ListTaskset\n\n__all__ = ['ListEnv', 'ListTaskset']\n")
    with ScriptedOpenAIServer(lambda body: body["messages"][-1]["content"].upper()) as server:
        result = run_prime(["eval", "run", "list-v1", "-m", "m", "-b", server.url, "-n", "2", "-r", "1", "-s"], tmp_path)
        chats = server.requests_to("/v1/chat/completions")
    assert result.returncode == 0, result.stderr
    rows = {int(r["example_id"]): r for r in read_rows(only_run_dir(tmp_path))}
    # three scripted user turns, each answered; the first user turn is the prompt
    assert [m["content"] for m in rows[0]["prompt"]] == ["a"]
    assert [m["content"] for m in rows[0]["completion"]] == ["A", "b", "B", "c", "C"]
    assert rows[0]["reward"] == 1.0 and rows[0]["stop_condition"] == "episode_ended"
    # the task's @vf.stop ends the exchange after "STOP": the third user turn is never sent
    assert [m["content"] for m in rows[1]["completion"]] == ["X", "stop", "STOP"]
    assert rows[1]["stop_condition"] == "said_stop" and rows[1]["reward"] == pytest.approx(2 / 3)
    assert len(chats) == 5


def test_a_resumed_run_of_a_taskset_whose_tasks_changed_is_refused_by_task_key(tmp_path: Path) -> None:
    write_env(tmp_path, "rev_v1", REVERSE.format(texts=TEXTS))
    taskset = tmp_path / "environments" / "rev_v1" / "rev_v1" / "taskset.py"
    with ScriptedOpenAIServer(half_right) as server:
        first = run_prime(["eval", "run", "rev-v1", "-m", "m", "-b", server.url, "-n", "2", "-r", "1", "-s"], tmp_path)
        run_dir = only_run_dir(tmp_path)
        same = run_prime(["eval", "run", "rev-v1", "-m", "m", "-b", server.url, "-R", str(run_dir)], tmp_path)
        taskset.write_text(taskset.read_text().replace("hello world", "goodbye world"))
        changed = run_prime(["eval", "run", "rev-v1", "-m", "m", "-b", server.url, "-R", str(run_dir)], tmp_path)
    assert first.returncode == 0 and same.returncode == 0, first.stderr + same.stderr
    assert changed.returncode == 2 and "the environment's tasks changed (example 0 was task" in changed.stderr
    assert "Traceback" not in changed.stderr and len(read_rows(run_dir)) == 2  # nothing lost


def test_env_check_on_a_v1_taskset_writes_the_reference_in_the_tag_its_reward_reads(tmp_path: Path) -> None:
    """A v1 task has no parser: the reference is written in the prompt's tag the reward pays, so a sound
    reward raises no false problem (as is, lcs would pay the reference 0)."""
    write_env(tmp_path, "rev_v1", REVERSE.format(texts=TEXTS))
    result = run_prime(["env", "check", "rev-v1"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the reference is written inside <reversed_text> tags: the writing the reward pays most" in result.stdout
    assert result.stdout.rstrip().splitlines()[-1].startswith("ok:"), result.stdout


def test_env_info_lists_a_v1_tasksets_config_fields_as_its_arguments(tmp_path: Path) -> None:
    write_env(tmp_path, "rev_v1", REVERSE.format(texts=TEXTS))
    result = run_prime(["env", "info", "rev-v1"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "class: TasksetEnvironment" in result.stdout and "  count: int = 4" in result.stdout
    assert "lcs (weight 1)" in result.stdout and "reply_chars (weight 0)" in result.stdout
