"""alphabet-sort: keep a list of names sorted as new names arrive, over 1-3 turns.

Turn 1 gives a few names to sort; each follow-up turn adds names and asks for the whole list,
sorted again. The model answers inside <sorted_names> tags, one name per line. The reward is the
mean over turns of a sequence similarity between the answer and the correct list (partial credit),
plus a small format reward. Names come from Faker with a seed, so every run sees the same data.
"""

from __future__ import annotations

import random
from difflib import SequenceMatcher
from typing import Any

import prime_cli.envs as vf

SYSTEM_PROMPT = (
    "You sort names alphabetically by first name. Each time you are given names, reply with the "
    "complete sorted list so far, one name per line, inside <sorted_names> and </sorted_names> tags."
)
FIRST_TURN = "Sort these names alphabetically:\n{names}"
FOLLOW_UP = "Add these names and give the whole list sorted again:\n{names}"


def make_rows(count: int, seed: int, min_turns: int, max_turns: int, min_names: int, max_names: int) -> list[dict[str, Any]]:
    from faker import Faker

    fake = Faker("en_US")
    fake.seed_instance(seed)
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        num_turns = rng.randint(min_turns, max_turns)
        used: set[str] = set()
        turns: list[list[str]] = []
        for _turn in range(num_turns):
            names: list[str] = []
            target = rng.randint(min_names, max_names)
            while len(names) < target:
                name = f"{fake.first_name()} {fake.last_name()}"
                if name not in used:
                    used.add(name)
                    names.append(name)
            turns.append(names)
        expected, seen = [], []
        for names in turns:
            seen = seen + names
            expected.append(sorted(seen))
        rows.append(
            {
                "question": FIRST_TURN.format(names="\n".join(turns[0])),
                "answer": "\n".join(expected[-1]),
                "info": {"num_turns": num_turns, "turn_names": turns, "expected": expected},
            }
        )
    return rows


def parse_names(text: str | None) -> list[str]:
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def list_similarity(got: list[str], want: list[str]) -> float:
    if not got and not want:
        return 1.0
    return SequenceMatcher(a=got, b=want, autojunk=False).ratio()


class AlphabetSortEnv(vf.MultiTurnEnv):
    """Follow-up turns add the row's next batch of names until the row's turn count is reached."""

    @vf.stop
    async def all_turns_answered(self, state: vf.State) -> bool:
        return state["turn"] >= state["info"]["num_turns"]

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> vf.Messages:
        names = state["info"]["turn_names"][state["turn"]]
        return [{"role": "user", "content": FOLLOW_UP.format(names="\n".join(names))}]


def load_environment(
    num_train_examples: int = 1000,
    num_eval_examples: int = 100,
    seed: int = 0,
    min_turns: int = 1,
    max_turns: int = 3,
    min_names_per_turn: int = 2,
    max_names_per_turn: int = 4,
    system_prompt: str = SYSTEM_PROMPT,
    format_weight: float = 0.2,
    similarity_power: float = 1,
    power_per_turn: bool = True,
) -> vf.Environment:
    """Alphabet-sort environment.

    Args:
        num_train_examples / num_eval_examples: rows generated for each split.
        seed: seed of the name generator (the eval split uses a different one).
        min_turns / max_turns: range of the number of turns of a row.
        min_names_per_turn / max_names_per_turn: names added per turn.
        system_prompt: the instruction given to the model (GEPA optimises it).
        format_weight: weight of the <sorted_names> format reward.
        similarity_power: exponent applied to the similarity (higher = a sharper penalty for small errors;
            primeintellect/alphabet-sort uses 4, the default 1 keeps partial credit for small models).
        power_per_turn: raise each turn's similarity to the power, then average (true), or average the
            turns and raise the mean once (false).
    """
    if not 1 <= min_turns <= max_turns:
        raise vf.EnvConfigError(f"need 1 <= min_turns <= max_turns (got {min_turns} and {max_turns})")
    if not 1 <= min_names_per_turn <= max_names_per_turn:
        raise vf.EnvConfigError(
            f"need 1 <= min_names_per_turn <= max_names_per_turn (got {min_names_per_turn} and {max_names_per_turn})"
        )
    if similarity_power <= 0:
        raise vf.EnvConfigError(f"similarity_power must be > 0 (got {similarity_power})")
    parser = vf.XMLParser(["sorted_names"], answer_field="sorted_names")

    def sorted_similarity(completion, info, parser) -> float:
        """Mean over the row's turns of the similarity of each answer to the correct list (to the power)."""
        answers = [parser.parse(text).sorted_names for text in vf.messages.assistant_texts(completion)]
        scores = [
            list_similarity(parse_names(answers[i]) if i < len(answers) else [], want)
            for i, want in enumerate(info["expected"])
        ]
        if power_per_turn:
            return sum(score**similarity_power for score in scores) / len(scores)
        return (sum(scores) / len(scores)) ** similarity_power

    rubric = vf.Rubric(funcs=[sorted_similarity, parser.get_format_reward_func()], weights=[1.0, format_weight], parser=parser)

    def build(count: int, row_seed: int):
        return lambda: make_rows(count, row_seed, min_turns, max_turns, min_names_per_turn, max_names_per_turn)

    return AlphabetSortEnv(
        dataset=build(num_train_examples, seed),
        eval_dataset=build(num_eval_examples, seed + 1_000_003),
        system_prompt=system_prompt,
        parser=parser,
        rubric=rubric,
        max_turns=max_turns,
    )
