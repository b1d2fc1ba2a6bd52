import pandas as pd
import pytest

import prime_cli.envs as vf


def env_with(dataset, **kwargs):
    return vf.SingleTurnEnv(dataset=dataset, **kwargs)


def test_question_rows_get_system_prompt_few_shot_and_ids():
    few_shot = [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "2"}]
    env = env_with([{"question": "2+3?", "answer": 5}, {"question": "q2"}], system_prompt="SYS", few_shot=few_shot)
    rows = env.get_dataset()
    assert rows[0]["prompt"] == [{"role": "system", "content": "SYS"}, *few_shot, {"role": "user", "content": "2+3?"}]
    assert rows[0]["answer"] == "5" and rows[1]["answer"] == ""
    assert [r["example_id"] for r in rows] == [0, 1]
    assert rows[0]["info"] == {} and rows[0]["task"] == "default"


def test_prompt_rows_keep_existing_system_message_and_get_one_when_missing():
    with_system = {"prompt": [{"role": "system", "content": "mine"}, {"role": "user", "content": "hi"}]}
    without = {"prompt": [{"role": "user", "content": "hey"}]}
    rows = env_with([with_system, without], system_prompt="SYS").get_dataset()
    assert rows[0]["prompt"][0] == {"role": "system", "content": "mine"}
    assert len(rows[0]["prompt"]) == 2
    assert rows[1]["prompt"][0] == {"role": "system", "content": "SYS"}


def test_dataframe_duck_typed_dataset_and_lazy_builder_are_accepted():
    frame = pd.DataFrame([{"question": "a", "answer": "1"}, {"question": "b", "answer": "2"}])

    class FakeHFDataset:  # what datasets.Dataset offers, without the dependency
        column_names = ["question", "answer"]

        def to_list(self):
            return [{"question": "c", "answer": "3"}]

    calls = []

    def builder():
        calls.append(1)
        return [{"question": "d"}]

    assert [r["question"] for r in env_with(frame).get_dataset()] == ["a", "b"]
    assert env_with(FakeHFDataset()).get_dataset()[0]["answer"] == "3"
    lazy = env_with(builder)
    assert calls == []  # not built until used
    assert lazy.get_dataset()[0]["question"] == "d" and calls == [1]
    lazy.get_dataset()
    assert calls == [1]  # built once


def test_info_json_string_is_parsed_and_invalid_json_names_the_row():
    rows = env_with([{"question": "a", "info": '{"k": 1}'}]).get_dataset()
    assert rows[0]["info"] == {"k": 1}
    env = env_with([{"question": "a"}, {"question": "b", "info": "{not json"}])
    with pytest.raises(vf.DatasetError, match=r"row 1 of the dataset: `info` is not valid JSON"):
        env.get_dataset()
    with pytest.raises(vf.DatasetError, match="must be a JSON object"):
        env_with([{"question": "a", "info": "[1, 2]"}]).get_dataset()


def test_row_without_prompt_or_question_names_row_and_columns():
    env = env_with([{"question": "ok"}, {"text": "x", "answer": "y"}])
    with pytest.raises(vf.DatasetError, match=r"row 1 of the dataset has neither `prompt` nor `question` \(its columns: answer, text\)"):
        env.get_dataset()


def test_other_bad_rows_are_named():
    with pytest.raises(vf.DatasetError, match="row 0 .* is a str"):
        env_with(["just a string"]).get_dataset()
    with pytest.raises(vf.DatasetError, match="example_id 3 appears twice"):
        env_with([{"question": "a", "example_id": 3}, {"question": "b", "example_id": 3}]).get_dataset()
    with pytest.raises(vf.DatasetError, match="must be a non-empty list of messages"):
        env_with([{"prompt": "not a list"}]).get_dataset()
    with pytest.raises(vf.DatasetError, match="must be a list of dicts"):
        env_with(42).get_dataset()


def test_get_dataset_n_and_seed_are_deterministic():
    env = env_with([{"question": str(i)} for i in range(20)])
    assert [r["question"] for r in env.get_dataset(n=3)] == ["0", "1", "2"]
    a = [r["example_id"] for r in env.get_dataset(n=5, seed=7)]
    b = [r["example_id"] for r in env.get_dataset(n=5, seed=7)]
    c = [r["example_id"] for r in env.get_dataset(n=5, seed=8)]
    assert a == b and a != c and len(set(a)) == 5


def test_eval_dataset_falls_back_to_dataset_and_missing_train_split_is_clear():
    env = env_with([{"question": "train"}])
    assert env.get_eval_dataset()[0]["question"] == "train"
    only_eval = vf.SingleTurnEnv(eval_dataset=[{"question": "e"}])
    assert only_eval.get_eval_dataset()[0]["question"] == "e"
    with pytest.raises(vf.EnvConfigError, match="no training dataset"):
        only_eval.get_dataset()
    with pytest.raises(vf.EnvConfigError, match="needs a dataset or an eval_dataset"):
        vf.SingleTurnEnv()


def test_changing_system_prompt_rebuilds_prompts():
    env = env_with([{"question": "q"}], system_prompt="old")
    assert env.get_dataset()[0]["prompt"][0]["content"] == "old"
    env.system_prompt = "new"
    assert env.get_dataset()[0]["prompt"][0]["content"] == "new"


def test_completion_message_type_builds_string_prompts():
    env = env_with([{"question": "Once upon"}], message_type="completion", system_prompt="Story:")
    assert env.get_dataset()[0]["prompt"] == "Story:\n\nOnce upon"
    with pytest.raises(vf.EnvConfigError, match="message_type"):
        env_with([{"question": "q"}], message_type="image")
