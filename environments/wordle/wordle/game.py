"""Wordle's rules, independent of any model: scoring a guess and replaying a game from its guesses."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources

WORD_LENGTH = 5
MAX_GUESSES = 6
GREEN, YELLOW, GRAY = "G", "Y", "X"
GUESS_TAG = re.compile(r"<guess>\s*(.*?)\s*</guess>", re.IGNORECASE | re.DOTALL)


def load_words() -> list[str]:
    """The packaged secret-word list (words.txt): lower-case five-letter words, sorted."""
    text = resources.files("wordle").joinpath("words.txt").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def score_guess(guess: str, secret: str) -> str:
    """Feedback letters for `guess` against `secret`: G right place, Y elsewhere in the word, X absent.

    Repeated letters follow the game: greens are assigned first, then yellows left to right, each
    letter of the secret used at most once (guess "speed" vs secret "abide": only one E is yellow).
    """
    guess, secret = guess.lower(), secret.lower()
    marks = [GRAY] * len(guess)
    unmatched = Counter(s for g, s in zip(guess, secret, strict=True) if g != s)
    for i, (g, s) in enumerate(zip(guess, secret, strict=True)):
        if g == s:
            marks[i] = GREEN
        elif unmatched[g] > 0:
            marks[i] = YELLOW
            unmatched[g] -= 1
    return "".join(marks)


def extract_guess(text: str) -> str | None:
    """The word in the last <guess>...</guess> tag of a reply (lower case), or None."""
    found = GUESS_TAG.findall(text or "")
    return found[-1].strip().lower() if found else None


def guess_problem(guess: str | None) -> str | None:
    """Why a guess is not playable, or None when it is a five-letter word."""
    if guess is None:
        return "no <guess>...</guess> tag found"
    if len(guess) != WORD_LENGTH or not guess.isalpha() or not guess.isascii():
        return f"{guess!r} is not a {WORD_LENGTH}-letter word"
    return None


@dataclass
class Game:
    """A game replayed from the model's replies: one reply is one attempt, valid or not."""

    secret: str
    attempts: list[str | None] = field(default_factory=list)  # the extracted guess of each reply
    feedback: list[str | None] = field(default_factory=list)  # None for an unplayable attempt

    @classmethod
    def replay(cls, secret: str, replies: list[str]) -> Game:
        game = cls(secret.lower())
        for reply in replies[:MAX_GUESSES]:
            game.play(extract_guess(reply))
            if game.solved:
                break
        return game

    def play(self, guess: str | None) -> str | None:
        self.attempts.append(guess)
        marks = None if guess_problem(guess) else score_guess(guess, self.secret)
        self.feedback.append(marks)
        return marks

    @property
    def solved(self) -> bool:
        return bool(self.feedback) and self.feedback[-1] == GREEN * WORD_LENGTH

    @property
    def over(self) -> bool:
        return self.solved or len(self.attempts) >= MAX_GUESSES

    @property
    def valid_count(self) -> int:
        return sum(1 for f in self.feedback if f is not None)

    def best_marks(self) -> str | None:
        """The feedback of the attempt with the most greens, then yellows."""
        played = [f for f in self.feedback if f is not None]
        return max(played, key=lambda f: (f.count(GREEN), f.count(YELLOW)), default=None)


def render_feedback(guess: str, marks: str) -> str:
    """`CRANE -> G X Y X X` style line the model reads."""
    return f"{guess.upper()} -> {' '.join(marks)}"
