import pytest

import prime_cli.envs as vf
from tests.support.scripted_client import ScriptedClient


def make_child(word: str, metric_name: str):
    def reward(completion) -> float:
        return 1.0 if word in (completion[-1]["content"] or "") else 0.0

    reward.__name__ = metric_name
    return vf.SingleTurnEnv(dataset=[{"question": f"say {word}", "answer": word}] * 2, system_prompt=f"sys-{word}",
                            rubric=vf.Rubric(funcs=[reward]))


async def test_rows_are_routed_by_task_and_metrics_are_the_union():
    group = vf.EnvGroup([make_child("apple", "apple_ok"), make_child("pear", "pear_ok")], env_names=["fruit-a", "fruit-b"])
    rows = group.get_dataset()
    assert [r["task"] for r in rows] == ["fruit-a", "fruit-a", "fruit-b", "fruit-b"]
    assert [r["example_id"] for r in rows] == [0, 1, 2, 3]
    assert rows[2]["prompt"][0]["content"] == "sys-pear"  # the child's own prompt
    client = ScriptedClient(lambda messages, tools, args: "pear" if "pear" in messages[-1]["content"] else "nope")
    [state_b] = await group.run_group(client, "m", rows[2], n=1)
    assert state_b["task"] == "fruit-b"
    assert state_b["metrics"] == {"apple_ok": 0.0, "pear_ok": 1.0} and state_b["reward"] == 1.0
    [state_a] = await group.run_group(client, "m", rows[0], n=1)
    assert state_a["metrics"] == {"apple_ok": 0.0, "pear_ok": 0.0} and state_a["reward"] == 0.0
    assert group.rubric.get_reward_func_names() == ["apple_ok", "pear_ok"]


def test_env_group_rejects_bad_names():
    child = make_child("a", "m")
    with pytest.raises(vf.EnvConfigError, match="1 environments but 2 env_names"):
        vf.EnvGroup([child], env_names=["x", "y"])
    with pytest.raises(vf.EnvConfigError, match="unique"):
        vf.EnvGroup([child, child], env_names=["same", "same"])
    with pytest.raises(vf.EnvConfigError, match="at least one"):
        vf.EnvGroup([])
