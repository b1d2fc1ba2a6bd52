import pytest

import prime_cli.envs as vf
from tests.support.scripted_client import ScriptedClient


def reverse_text_model(messages, tools, args):
    text = messages[-1]["content"]
    return f"<reversed_text>{text[::-1]}</reversed_text>"


@pytest.fixture(scope="module")
def reverse_text():
    return vf.load_environment("reverse-text", num_train_examples=50, num_eval_examples=10)


def test_reverse_text_data_is_generated_deterministically(reverse_text):
    rows = reverse_text.get_dataset()
    assert len(rows) == 50 and len({r["answer"] for r in rows}) == 50
    assert all(r["answer"] == r["prompt"][-1]["content"][::-1] for r in rows)
    assert rows[0]["prompt"][0]["role"] == "system"
    again = vf.load_environment("reverse-text", num_train_examples=50)
    assert [r["answer"] for r in again.get_dataset()] == [r["answer"] for r in rows]
    other = vf.load_environment("reverse-text", num_train_examples=50, seed=1)
    assert [r["answer"] for r in other.get_dataset()] != [r["answer"] for r in rows]
    train_answers = {r["answer"] for r in rows}
    assert any(r["answer"] not in train_answers for r in reverse_text.get_eval_dataset())


async def test_reverse_text_rewards_full_partial_and_format(reverse_text):
    row = reverse_text.get_eval_dataset()[0]
    [perfect] = await reverse_text.run_group(ScriptedClient(reverse_text_model), "m", row)
    assert perfect["metrics"] == {"lcs_reward": 1.0, "format_reward": 1.0}
    assert perfect["reward"] == pytest.approx(1.2)
    forward = row["prompt"][-1]["content"]
    [wrong_way] = await reverse_text.run_group(ScriptedClient([f"<reversed_text>{forward}</reversed_text>"]), "m", row)
    assert 0.0 < wrong_way["metrics"]["lcs_reward"] < 1.0
    [no_tags] = await reverse_text.run_group(ScriptedClient([forward[::-1]]), "m", row)
    assert no_tags["reward"] == 0.0


async def test_reverse_text_can_score_replies_without_tags():
    env = vf.load_environment("reverse-text", num_train_examples=5, answer_without_tags=True)
    row = env.get_dataset()[0]
    forward = row["prompt"][-1]["content"]
    [bare] = await env.run_group(ScriptedClient([f"  {forward[::-1]}\n"]), "m", row)
    assert bare["metrics"] == {"lcs_reward": 1.0, "format_reward": 0.0}
    [tagged] = await env.run_group(ScriptedClient([f"{forward[::-1]} <reversed_text>x</reversed_text>"]), "m", row)
    assert tagged["metrics"]["lcs_reward"] < 0.5, "the tags still win when present"


async def test_reverse_text_plain_text_pays_for_the_reversal_not_for_brevity():
    env = vf.load_environment("reverse-text", num_train_examples=5, min_words=6, max_words=10, plain_text=True)
    row = env.get_dataset()[0]
    forward = row["prompt"][-1]["content"]
    answer = forward[::-1]
    assert "<reversed_text>" not in row["prompt"][0]["content"]  # the prompt asks for what is scored

    async def score(reply: str) -> dict:
        [result] = await env.run_group(ScriptedClient([reply]), "m", row)
        assert set(result["metrics"]) == {"reversal_reward"}  # no format reward
        return result

    assert (await score(f" {answer}\n"))["reward"] == 1.0
    half, three = (await score(answer[: len(answer) // 2]))["reward"], (await score(answer[:3]))["reward"]
    assert half <= 0.5 and three <= 3 / len(answer)
    # the default (tagged) scoring pays the same fragments far more: what a policy learned to exploit
    from reverse_text import lcs_ratio

    assert lcs_ratio(answer[: len(answer) // 2], answer) > 0.66 and lcs_ratio(answer[:3], answer) > 1.5 * three
    rambling = (await score(f"{answer} Here is the reversed text, as you asked: I hope it helps you."))["reward"]
    assert rambling < 0.6
    tagged = (await score(f"<reversed_text>{answer}</reversed_text>"))["reward"]
    assert 0.6 < tagged < 1.0  # the tags are not part of the answer


def test_length_aware_lcs_values():
    from reverse_text import length_aware_lcs

    assert length_aware_lcs("abcd", "abcd") == 1.0 and length_aware_lcs("", "") == 1.0
    assert length_aware_lcs("ab", "abcd") == 0.5 and length_aware_lcs("abcdabcd", "abcd") == 0.5
    assert length_aware_lcs("", "abcd") == 0.0 and length_aware_lcs("xyz", "abc") == 0.0


def test_reverse_text_accepts_system_prompt_and_rejects_bad_ranges():
    env = vf.load_environment("reverse-text", system_prompt="Mirror it.", num_train_examples=2)
    assert env.get_dataset()[0]["prompt"][0]["content"] == "Mirror it."
    plain = vf.load_environment("reverse-text", system_prompt="Mirror it.", num_train_examples=2, plain_text=True)
    assert plain.get_dataset()[0]["prompt"][0]["content"] == "Mirror it."
    with pytest.raises(vf.EnvConfigError, match="min_words"):
        vf.load_environment("reverse-text", min_words=5, max_words=2)


def test_lcs_ratio_values():
    from reverse_text import lcs_ratio

    assert lcs_ratio("abc", "abc") == 1.0
    assert lcs_ratio("abc", "xyz") == 0.0
    assert lcs_ratio("abcd", "abxd") == pytest.approx(0.75)
    assert lcs_ratio("", "") == 1.0 and lcs_ratio("", "a") == 0.0


def sorting_model(messages, tools, args):
    names = []
    for message in messages:
        if message["role"] == "user":
            names += [line for line in message["content"].splitlines()[1:] if line.strip()]
    return "<sorted_names>\n" + "\n".join(sorted(names)) + "\n</sorted_names>"


async def test_alphabet_sort_runs_every_turn_and_scores_per_turn():
    env = vf.load_environment("alphabet-sort", num_train_examples=20, seed=3)
    rows = env.get_dataset()
    assert {r["info"]["num_turns"] for r in rows} == {1, 2, 3}
    row = next(r for r in rows if r["info"]["num_turns"] == 3)
    [state] = await env.run_group(ScriptedClient(sorting_model), "m", row)
    assert state["turn"] == 3 and state["stop_condition"] == "all_turns_answered"
    assert [m["role"] for m in state["completion"]] == ["assistant", "user"] * 2 + ["assistant"]
    assert state["metrics"] == {"sorted_similarity": 1.0, "format_reward": 1.0}

    # right on the first turn only: one third of the per-turn credit is lost on each later turn
    first_only = sorting_model(row["prompt"], None, None)
    [partial] = await env.run_group(ScriptedClient([first_only]), "m", row)
    assert 1 / 3 <= partial["metrics"]["sorted_similarity"] < 1.0


async def test_alphabet_sort_similarity_power_per_turn_or_on_the_mean():
    # the guide's `power_per_turn` (with `similarity_power`): raise each turn's similarity to the power and
    # average, or average first and raise the mean once
    row = next(r for r in vf.load_environment("alphabet-sort", num_train_examples=20, seed=3).get_dataset()
               if r["info"]["num_turns"] == 3)
    first_only = sorting_model(row["prompt"], None, None)
    scores = {}
    for per_turn in (True, False):
        env = vf.load_environment("alphabet-sort", num_train_examples=20, seed=3, similarity_power=2,
                                  power_per_turn=per_turn)
        [state] = await env.run_group(ScriptedClient([first_only]), "m", row)
        scores[per_turn] = state["metrics"]["sorted_similarity"]
    from alphabet_sort import list_similarity, parse_names

    replies = [m["content"] for m in state["completion"] if m["role"] == "assistant"]
    answers = [parse_names(r.split("<sorted_names>")[1].split("</sorted_names>")[0]) for r in replies]
    turns = [list_similarity(got, want) for got, want in zip(answers, row["info"]["expected"], strict=True)]
    assert turns[0] == 1.0 and all(t < 1.0 for t in turns[1:])
    assert scores[True] == pytest.approx(sum(t**2 for t in turns) / 3)
    assert scores[False] == pytest.approx((sum(turns) / 3) ** 2)
    assert scores[True] > scores[False]
    with pytest.raises(vf.EnvConfigError, match="similarity_power"):
        vf.load_environment("alphabet-sort", similarity_power=0)


def test_alphabet_sort_is_deterministic_and_validates_arguments():
    a = vf.load_environment("alphabet-sort", num_train_examples=5, seed=9).get_dataset()
    b = vf.load_environment("alphabet-sort", num_train_examples=5, seed=9).get_dataset()
    assert [r["info"] for r in a] == [r["info"] for r in b]
    for row in a:
        expected = row["info"]["expected"]
        assert expected[-1] == sorted(sum(row["info"]["turn_names"], []))
    with pytest.raises(vf.EnvConfigError, match="min_turns"):
        vf.load_environment("alphabet-sort", min_turns=0)
