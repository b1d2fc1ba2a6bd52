"""wordle: find a secret five-letter word in at most six guesses.

Multi turn. Each reply holds one guess in <guess>...</guess> tags; the environment answers with
feedback per letter (G right place, Y in the word elsewhere, X not in it). The game ends when the
word is found or after six attempts (an unplayable reply, such as a missing tag or a word of the
wrong length, uses up an attempt). Rewards are recomputed from the replies, so they do not depend
on how the rollout ended: solving, fewer guesses, partial credit for greens and yellows, format.
Secret words come from the packaged list (wordle/words.txt), chosen with a seed.
"""

from __future__ import annotations

import random
from typing import Any

import prime_cli.envs as vf

from .game import (
    GREEN,
    MAX_GUESSES,
    WORD_LENGTH,
    YELLOW,
    Game,
    extract_guess,
    guess_problem,
    load_words,
    render_feedback,
)

SYSTEM_PROMPT = (
    "You are playing Wordle. Find the secret five-letter English word in at most six guesses. "
    "After each guess you get one mark per letter: G = right letter in the right place, "
    "Y = the letter is in the word but elsewhere, X = the letter is not in the word. "
    "Think briefly, then give exactly one guess per reply as <guess>word</guess>."
)
FIRST_MESSAGE = "A new game: the secret is a five-letter word. You have six guesses. Make your first guess."

__all__ = ["WordleEnv", "load_environment", "Game"]


def replies_of(completion: vf.Messages) -> list[str]:
    return vf.messages.assistant_texts(completion)


class WordleEnv(vf.MultiTurnEnv):
    """Feedback after each guess; stops as soon as the game is over."""

    @vf.stop(priority=50)
    async def game_over(self, state: vf.State) -> bool:
        return Game.replay(state["answer"], replies_of(state["completion"])).over

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> vf.Messages:
        game = Game.replay(state["answer"], replies_of(state["completion"]))
        attempt, marks = game.attempts[-1], game.feedback[-1]
        left = MAX_GUESSES - len(game.attempts)
        if marks is None:
            text = f"Invalid guess: {guess_problem(attempt)}. Reply with <guess>word</guess>. {left} guesses left."
        else:
            text = f"{render_feedback(attempt or '', marks)}\n{left} guesses left."
        return [{"role": "user", "content": text}]


# -- rewards ---------------------------------------------------------------------------------------


def solved(completion, answer) -> float:
    """1.0 when the secret word was guessed within six attempts."""
    return 1.0 if Game.replay(answer, replies_of(completion)).solved else 0.0


def fewer_guesses(completion, answer) -> float:
    """(7 - attempts) / 6 when solved: 1.0 in one guess, 1/6 in six; 0.0 when not solved."""
    game = Game.replay(answer, replies_of(completion))
    return (MAX_GUESSES + 1 - len(game.attempts)) / MAX_GUESSES if game.solved else 0.0


def partial_credit(completion, answer) -> float:
    """Best attempt's letters: 1.0 when solved, else (2 * greens + yellows) / 10."""
    game = Game.replay(answer, replies_of(completion))
    if game.solved:
        return 1.0
    marks = game.best_marks()
    if marks is None:
        return 0.0
    return (2 * marks.count(GREEN) + marks.count(YELLOW)) / (2 * WORD_LENGTH)


def guess_format(completion, answer) -> float:
    """Share of attempts that were a well-formed <guess> of a five-letter word."""
    game = Game.replay(answer, replies_of(completion))
    return game.valid_count / len(game.attempts) if game.attempts else 0.0


# -- data ------------------------------------------------------------------------------------------


def secret_splits(seed: int, num_train: int, num_eval: int) -> tuple[list[str], list[str]]:
    """Disjoint eval and train secrets from the shuffled word list (the same for the same seed)."""
    words = load_words()
    random.Random(seed).shuffle(words)
    evaluation = words[:num_eval]
    train = words[num_eval:][: max(num_train, 0)] if num_train >= 0 else words[num_eval:]
    return train, evaluation


def rows_for(secrets: list[str]) -> list[dict[str, Any]]:
    return [{"question": FIRST_MESSAGE, "answer": secret} for secret in secrets]


def load_environment(
    num_train_examples: int = -1,
    num_eval_examples: int = 100,
    seed: int = 0,
    system_prompt: str = SYSTEM_PROMPT,
    solved_weight: float = 1.0,
    speed_weight: float = 0.5,
    partial_weight: float = 0.3,
    format_weight: float = 0.2,
) -> vf.Environment:
    """Wordle environment.

    Args:
        num_train_examples: training games (-1: every word not used for evaluation).
        num_eval_examples: evaluation games (their secrets never appear in training).
        seed: seed of the word shuffle; the same seed gives the same games.
        system_prompt: the rules given to the model (GEPA optimises it).
        solved_weight / speed_weight / partial_weight / format_weight: reward weights.
    """
    total = len(load_words())
    if not 0 < num_eval_examples < total:
        raise vf.EnvConfigError(f"num_eval_examples must be between 1 and {total - 1} (got {num_eval_examples})")
    train, evaluation = secret_splits(seed, num_train_examples, num_eval_examples)
    parser = vf.Parser(extract_fn=extract_guess)
    rubric = vf.Rubric(
        funcs=[solved, fewer_guesses, partial_credit, guess_format],
        weights=[solved_weight, speed_weight, partial_weight, format_weight],
        parser=parser,
    )
    return WordleEnv(
        dataset=rows_for(train) if train else None,
        eval_dataset=rows_for(evaluation),
        system_prompt=system_prompt,
        parser=parser,
        rubric=rubric,
        max_turns=MAX_GUESSES,
    )
