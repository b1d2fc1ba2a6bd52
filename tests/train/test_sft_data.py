"""SFT data sources (prime_cli/train/sft_data.py): every format read into conversations, eval runs kept by
reward, and bad rows counted by reason."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from prime_cli.train.config_sft import SftSource
from prime_cli.train.errors import TrainConfigError
from prime_cli.train.sft_data import describe_bad, locate, read_source
from tests.support.scripted_client import ScriptedClient, tool_call

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+3?"},
        {"role": "assistant", "content": "5"}]
TOOL_CHAT = [{"role": "user", "content": "Weather in Paris?"},
             {"role": "assistant", "content": None, "tool_calls": [tool_call("weather", {"city": "Paris"})]},
             {"role": "tool", "tool_call_id": "call_0", "content": "sunny"},
             {"role": "assistant", "content": "Sunny."}]
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


def read(path: Path | str, base: Path | None = None, **keys):
    return read_source(SftSource(dataset=str(path), **keys), base or Path.cwd())


def test_jsonl_messages_with_tools_and_prompt_completion_rows(tmp_path):
    write_jsonl(tmp_path / "rows.jsonl", [
        {"messages": CHAT},
        {"messages": TOOL_CHAT, "tools": TOOLS},
        {"prompt": "Say hi", "completion": "hi"},
        {"prompt": [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}],
         "completion": [{"role": "assistant", "content": "A"}]},
    ])
    rows = read("rows.jsonl", tmp_path)
    assert rows.bad == {}
    assert [c.messages for c in rows.conversations][0] == CHAT
    tool = rows.conversations[1]
    assert tool.tools == TOOLS and tool.messages[1]["content"] == ""
    # arguments as vLLM hands them to a chat template: the JSON string's object (a `tojson` template would
    # otherwise encode the string a second time)
    assert tool.messages[1]["tool_calls"][0]["function"] == {"name": "weather", "arguments": {"city": "Paris"}}
    assert tool.messages[2] == {"role": "tool", "tool_call_id": "call_0", "content": "sunny"}
    assert rows.conversations[2].messages == [{"role": "user", "content": "Say hi"},
                                              {"role": "assistant", "content": "hi"}]
    assert [m["role"] for m in rows.conversations[3].messages] == ["system", "user", "assistant"]
    shots = read_source(SftSource(dataset=str(write_jsonl(tmp_path / "shots.jsonl", [
        {"prompt": [{"role": "user", "content": "ab"}, {"role": "assistant", "content": "ba"},
                    {"role": "user", "content": "cd"}], "completion": "dc"}]))), tmp_path)
    assert [m.get("weight", 1) for m in shots.conversations[0].messages] == [1, 0, 1, 1]  # the prompt's reply: context
    assert rows.conversations[2].origin == "rows.jsonl line 3"


def test_bad_rows_are_counted_by_reason_and_max_rows_takes_the_first_good_ones(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", [
        {"messages": CHAT},
        {"text": "no messages here"},
        {"messages": [{"role": "user", "content": "hi"}]},
        '{"messages": [',
        {"messages": [{"content": "no role"}, {"role": "assistant", "content": "x"}]},
        {"prompt": "only a prompt"},
        {"messages": CHAT},
        {"messages": CHAT},
    ])
    rows = read(path)
    assert len(rows.conversations) == 3
    assert rows.bad == {"missing column messages": 1, "no assistant turn": 1, "an unreadable JSON line": 1,
                        "a message without role or content": 1, "missing column completion": 1}
    assert describe_bad({"no assistant turn": 2, "missing column messages": 1}) == \
        "3 rows skipped: 2 no assistant turn, 1 missing column messages"
    assert describe_bad({}) == ""
    first = read(path, max_rows=2)
    assert [c.origin for c in first.conversations] == ["rows.jsonl line 1", "rows.jsonl line 7"]


def test_json_list_and_parquet_files(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    (tmp_path / "rows.json").write_text(json.dumps([{"messages": CHAT}, {"messages": CHAT[:2]}]))
    rows = read(tmp_path / "rows.json")
    assert len(rows.conversations) == 1 and rows.bad == {"no assistant turn": 1}
    # Parquet structs fill a message's absent fields with nulls: they are dropped
    table = pa.Table.from_pylist([{"messages": CHAT, "tools": json.dumps(TOOLS)}, {"messages": TOOL_CHAT, "tools": None}])
    pq.write_table(table, tmp_path / "rows.parquet")
    rows = read(tmp_path / "rows.parquet")
    assert rows.bad == {}
    assert rows.conversations[0].messages == CHAT and rows.conversations[0].tools == TOOLS
    assert rows.conversations[1].messages[2] == {"role": "tool", "tool_call_id": "call_0", "content": "sunny"}
    assert rows.conversations[1].tools is None


def save_to_disk(folder: Path, rows: list[dict]) -> None:
    """What `datasets`' save_to_disk writes for a Dataset: Arrow IPC stream files, state.json, dataset_info.json."""
    import pyarrow as pa

    folder.mkdir(parents=True)
    table = pa.Table.from_pylist(rows)
    with pa.OSFile(str(folder / "data-00000-of-00001.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}],
                                                   "_split": folder.name}))
    (folder / "dataset_info.json").write_text("{}")


def test_hugging_face_dataset_folders_saved_and_of_data_files(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    saved = tmp_path / "saved"
    save_to_disk(saved / "train", [{"messages": CHAT}] * 3)
    save_to_disk(saved / "test", [{"messages": TOOL_CHAT}])
    (saved / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    assert len(read(saved).conversations) == 3
    assert read(saved, split="test").conversations[0].messages[-1]["content"] == "Sunny."
    with pytest.raises(TrainConfigError, match="splits train, test, not 'dev'"):
        read(saved, split="dev")
    assert len(read(saved / "train").conversations) == 3  # a Dataset folder itself

    repo = tmp_path / "repo"
    (repo / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{"prompt": "a", "completion": "b"}] * 2), repo / "data" / "train-00000-of-00001.parquet")
    write_jsonl(repo / "data" / "test.jsonl", [{"messages": CHAT}])
    assert [c.messages[-1]["content"] for c in read(repo).conversations] == ["b", "b"]
    assert read(repo, split="test").conversations[0].messages == CHAT


def test_a_dataset_name_is_read_from_the_local_hugging_face_cache_and_never_downloaded(tmp_path, monkeypatch):
    pytest.importorskip("huggingface_hub")
    cache = tmp_path / "hub"
    snapshot = cache / "datasets--someone--chats" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    write_jsonl(snapshot / "train.jsonl", [{"messages": CHAT}])
    (cache / "datasets--someone--chats" / "refs").mkdir()
    (cache / "datasets--someone--chats" / "refs" / "main").write_text("a" * 40)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    rows = read("someone/chats", tmp_path)
    assert rows.conversations[0].messages == CHAT and "Hugging Face cache" in rows.description
    with pytest.raises(TrainConfigError) as missing:
        read("someone/other", tmp_path)
    message = str(missing.value)
    assert "not a dataset in the local Hugging Face cache: nothing is downloaded" in message and "\n" not in message


def test_a_missing_path_or_an_unknown_format_is_one_line_naming_the_formats(tmp_path):
    with pytest.raises(TrainConfigError, match=r"\./nowhere\.jsonl.*no such file") as missing:
        read("./nowhere.jsonl", tmp_path)
    assert ".jsonl, .json or .parquet" in str(missing.value)
    (tmp_path / "rows.csv").write_text("a,b\n")
    with pytest.raises(TrainConfigError, match=r"a \.csv file is not read; give a \.jsonl"):
        read(tmp_path / "rows.csv")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TrainConfigError, match="no data in this folder"):
        read(tmp_path / "empty")
    # locate checks a source without reading its rows (prime train, before anything starts)
    with pytest.raises(TrainConfigError, match="no such file"):
        locate(SftSource(dataset="./nowhere.jsonl"), tmp_path)
    write_jsonl(tmp_path / "rows.jsonl", ["{broken"])
    assert locate(SftSource(dataset="rows.jsonl"), tmp_path).files == [tmp_path / "rows.jsonl"]


# --- saved eval runs, written by the eval engine itself --------------------------------------------------


def replier():
    """Per sentence: half of the reversal first, then the exact reversal; a server error for sentences starting with W."""
    seen: dict[str, int] = {}

    def reply(messages, tools, sampling_args):
        text = messages[-1]["content"]
        if text.startswith("W"):
            raise RuntimeError("the server failed")
        seen[text] = seen.get(text, 0) + 1
        return text[::-1] if seen[text] > 1 else text[::-1][: len(text) // 2]

    return reply


@pytest.fixture(scope="module")
def eval_run(tmp_path_factory) -> Path:
    from prime_cli.envs import load_environment
    from prime_cli.evals.in_training import evaluate_policy

    run_dir = tmp_path_factory.mktemp("evals") / "outputs" / "reverse-text--m" / "run1"
    env = load_environment("reverse-text", plain_text=True, num_eval_examples=12)
    result = asyncio.run(evaluate_policy(env, "reverse-text", {"plain_text": True}, ScriptedClient(replier()), "m",
                                         "http://unused/v1", run_dir, num_examples=12, rollouts_per_example=2,
                                         max_concurrent=4))
    assert result.num_rollouts == 24
    return run_dir


def saved_rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def kept_keys(rows) -> list[tuple]:
    return sorted(c.origin.split(" ", 1)[1] for c in rows.conversations)


def key(row: dict) -> str:
    return f"example {row['example_id']} rollout {row['rollout_idx']}"


def test_eval_runs_min_reward_keeps_exactly_the_rollouts_at_or_above_it(eval_run):
    rows = saved_rows(eval_run)
    errored = [r for r in rows if r.get("error")]
    good = [r for r in rows if not r.get("error")]
    assert errored and {r["reward"] for r in good} >= {1.0} and min(r["reward"] for r in good) < 0.9

    everything = read(eval_run)
    assert everything.bad == {"errored rollout": len(errored)}
    assert kept_keys(everything) == sorted(key(r) for r in good)
    first = everything.conversations[0]
    assert first.messages[0]["role"] == "system" and "Reverse the text" in first.messages[0]["content"]
    # the prompt's few-shot replies are context (weight 0); the rollout's reply is trained
    assert [m.get("weight", 1) for m in first.messages if m["role"] == "assistant"] == [0, 0, 1]

    high = read(eval_run, min_reward=0.9)
    assert kept_keys(high) == sorted(key(r) for r in good if r["reward"] >= 0.9)
    assert high.bad == {"errored rollout": len(errored)}
    below = sum(1 for r in good if r["reward"] < 0.9)
    assert f"{len(rows)} rollouts, {below} below min_reward 0.9" in high.description
    # the conversation is the rollout's own: the reply it was scored on
    for conversation in high.conversations:
        question = conversation.messages[-2]["content"]
        assert conversation.messages[-1]["content"] == question[::-1]


def test_best_per_example_keeps_each_examples_best_rollout_the_first_of_equals(eval_run, tmp_path):
    rows = saved_rows(eval_run)
    # a copy of the run whose rollout 1 of each example scores higher: the best is then rollout 1
    copy = tmp_path / "runs" / "copy"
    copy.mkdir(parents=True)
    (copy / "metadata.json").write_text((eval_run / "metadata.json").read_text())
    for row in rows:
        row["reward"] = (row["reward"] or 0) + (0.5 if row["rollout_idx"] == 1 else 0.0)
    write_jsonl(copy / "results.jsonl", rows)
    best = read(copy, best_per_example=True)
    good = [r for r in rows if not r.get("error")]
    expected = {}
    for row in good:
        if row["example_id"] not in expected or row["reward"] > expected[row["example_id"]]["reward"]:
            expected[row["example_id"]] = row
    assert kept_keys(best) == sorted(key(r) for r in expected.values())
    # equal rewards: the first rollout (file order) of each example
    for row in rows:
        row["reward"] = 1.0
    write_jsonl(copy / "results.jsonl", rows)
    firsts = {}
    for row in rows:
        if not row.get("error"):
            firsts.setdefault(row["example_id"], row)
    assert kept_keys(read(copy, best_per_example=True)) == sorted(key(r) for r in firsts.values())


def test_a_folder_of_eval_runs_reads_every_run_and_counts_unreadable_lines(eval_run, tmp_path):
    import shutil

    root = tmp_path / "outputs"
    for name in ("a", "b"):
        shutil.copytree(eval_run, root / "reverse-text--m" / name)
    lines = (root / "reverse-text--m" / "b" / "results.jsonl").read_text().splitlines()
    lines.insert(1, "{not json")
    (root / "reverse-text--m" / "b" / "results.jsonl").write_text("\n".join(lines) + "\n")
    rows = read(root, min_reward=1.0)
    single = read(eval_run, min_reward=1.0)
    assert len(rows.conversations) == 2 * len(single.conversations)
    assert rows.bad["an unreadable JSON line"] == 1
    assert rows.bad["errored rollout"] == 2 * single.bad["errored rollout"]
    assert "2 eval runs of reverse-text" in rows.description


def test_assistant_turns_of_weight_0_are_kept_as_context_and_a_row_needs_one_of_weight_1(tmp_path):
    few_shot = [{"role": "user", "content": "ab"}, {"role": "assistant", "content": "ba", "weight": 0},
                {"role": "user", "content": "cd"}]
    path = write_jsonl(tmp_path / "rows.jsonl", [
        {"messages": [*few_shot, {"role": "assistant", "content": "dc"}]},
        {"messages": [*few_shot, {"role": "assistant", "content": "dc", "weight": 0}]},
        {"messages": [*few_shot, {"role": "assistant", "content": "dc", "weight": 2}]},
    ])
    rows = read(path)
    assert rows.conversations[0].messages[1] == {"role": "assistant", "content": "ba", "weight": 0}
    assert rows.bad == {"no assistant turn of weight 1": 1, "a weight other than 0 or 1 on an assistant message": 1}


def test_a_truncated_rollout_is_counted_not_trained(eval_run, tmp_path):
    """A rollout cut at max_tokens is no answer: trained (with the end-of-turn token the template adds) it would
    teach the student to stop mid-way."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(eval_run, run)
    rows = saved_rows(run)
    good = [r for r in rows if not r.get("error")]
    cut = good[0]
    cut["is_truncated"] = True
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    read_rows = read(run)
    assert read_rows.bad["truncated rollout"] == 1
    assert key(cut) not in kept_keys(read_rows) and len(read_rows.conversations) == len(good) - 1


def test_a_weight_on_a_user_turn_is_ignored_and_a_string_argument_that_is_not_json_kept(tmp_path):
    write_jsonl(tmp_path / "rows.jsonl", [{"messages": [
        {"role": "user", "content": "Q", "weight": 1},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "not json"}}]}]}])
    rows = read("rows.jsonl", tmp_path)
    assert rows.bad == {} and rows.conversations[0].messages[0] == {"role": "user", "content": "Q"}
    assert rows.conversations[0].messages[1]["tool_calls"][0]["function"]["arguments"] == "not json"
