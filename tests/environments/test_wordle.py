"""wordle: the game rules, the rewards, seeded data and a CLI run where the scripted model plays."""

import json

import pytest
from wordle.game import MAX_GUESSES, Game, extract_guess, guess_problem, load_words, score_guess

import prime_cli.envs as vf
from tests.evals.cli_support import only_run_dir, read_rows, run_prime
from tests.support.scripted_client import ScriptedClient
from tests.support.scripted_server import ScriptedOpenAIServer


@pytest.mark.parametrize("guess, secret, marks", [
    ("crane", "crane", "GGGGG"),
    ("trace", "crane", "XGGYG"),
    ("speed", "abide", "XXYXY"),  # one E in the secret: only the first E is marked
    ("eerie", "there", "YXYXG"),
    ("llama", "hello", "YYXXX"),
    ("xylyl", "crane", "XXXXX"),
])
def test_score_guess_follows_the_rules_for_repeated_letters(guess, secret, marks):
    assert score_guess(guess, secret) == marks


def test_the_game_ends_on_success_or_after_six_attempts():
    won = Game.replay("crane", ["<guess>slate</guess>", "<guess>crane</guess>", "<guess>never</guess>"])
    assert won.solved and won.over and won.attempts == ["slate", "crane"]
    lost = Game.replay("crane", ["<guess>slate</guess>"] * 9)
    assert not lost.solved and lost.over and len(lost.attempts) == MAX_GUESSES
    assert not Game.replay("crane", ["<guess>slate</guess>"] * 5).over


def test_guess_parsing_and_validation():
    assert extract_guess("I think <guess> Crane </guess>") == "crane"
    assert extract_guess("<guess>a</guess> then <guess>trace</guess>") == "trace"
    assert extract_guess("crane") is None
    assert "no <guess>" in guess_problem(None) and "5-letter" in guess_problem("cranes") and guess_problem("crane") is None


def test_packaged_word_list_is_clean():
    words = load_words()
    assert len(words) >= 400 and len(set(words)) == len(words)
    assert all(len(w) == 5 and w.isalpha() and w.islower() for w in words)


def test_seed_makes_games_deterministic_and_splits_disjoint():
    first = vf.load_environment("wordle", seed=3, num_eval_examples=20)
    again = vf.load_environment("wordle", seed=3, num_eval_examples=20)
    other = vf.load_environment("wordle", seed=4, num_eval_examples=20)
    secrets = [r["answer"] for r in first.get_eval_dataset()]
    assert secrets == [r["answer"] for r in again.get_eval_dataset()]
    assert secrets != [r["answer"] for r in other.get_eval_dataset()]
    assert not set(secrets) & {r["answer"] for r in first.get_dataset()}


async def play(replies, secret="crane"):
    env = vf.load_environment("wordle", num_eval_examples=5)
    row = dict(env.get_eval_dataset()[0], answer=secret)
    return (await env.run_group(ScriptedClient(replies), "m", row, n=1))[0]


async def test_solving_in_two_guesses():
    state = await play(["<guess>trace</guess>", "<guess>crane</guess>"])
    assert state["metrics"] == {"solved": 1.0, "fewer_guesses": pytest.approx(5 / 6), "partial_credit": 1.0,
                                "guess_format": 1.0}
    assert state["stop_condition"] == "game_over" and not state["is_truncated"]
    feedback = state["completion"][1]["content"]
    assert "TRACE -> X G G Y G" in feedback and "5 guesses left" in feedback


async def test_wrong_guesses_get_partial_credit_and_the_game_stops_after_six():
    state = await play(["<guess>trace</guess>"] * 10)
    assert len([m for m in state["completion"] if m["role"] == "assistant"]) == MAX_GUESSES
    assert state["metrics"]["solved"] == 0.0 and state["metrics"]["fewer_guesses"] == 0.0
    assert state["metrics"]["partial_credit"] == pytest.approx((2 * 3 + 1) / 10)


async def test_malformed_replies_use_up_attempts_and_score_no_format():
    state = await play(["I guess crane", "<guess>cranes</guess>", "<guess>crane</guess>"])
    assert state["metrics"]["solved"] == 1.0 and state["metrics"]["guess_format"] == pytest.approx(1 / 3)
    assert state["metrics"]["fewer_guesses"] == pytest.approx(4 / 6)
    assert "Invalid guess: no <guess>" in state["completion"][1]["content"]
    nothing = await play(["no idea"] * 6)
    assert nothing["reward"] == 0.0


def consistent_solver(request):
    """A scripted player: guess the first word that fits all feedback so far."""
    history = request["messages"]
    guesses = [extract_guess(m["content"] or "") for m in history if m["role"] == "assistant"]
    marks = [m["content"].split("->")[1].split("\n")[0].replace(" ", "") for m in history
             if m["role"] == "user" and "->" in (m["content"] or "")]
    candidates = [w for w in load_words()
                  if all(score_guess(g, w) == k for g, k in zip(guesses, marks, strict=False) if g)]
    return f"<guess>{candidates[0] if candidates else 'crane'}</guess>"


def test_eval_run_end_to_end_with_a_scripted_player(tmp_path):
    with ScriptedOpenAIServer(consistent_solver) as server:
        result = run_prime(["eval", "run", "wordle", "-m", "m", "-b", server.url, "-n", "10", "-r", "2", "-s"], tmp_path)
    assert result.returncode == 0, result.stderr
    rows = read_rows(only_run_dir(tmp_path))
    assert len(rows) == 20 and not any(r["error"] for r in rows)
    for row in rows:
        guesses = [extract_guess(m["content"]) for m in row["completion"] if m["role"] == "assistant"]
        assert 1 <= len(guesses) <= MAX_GUESSES
        assert row["metrics"]["solved"] == (1.0 if guesses[-1] == row["answer"] else 0.0)
    assert sum(r["metrics"]["solved"] for r in rows) >= 14  # the consistent player usually wins
    assert json.loads((only_run_dir(tmp_path) / "metadata.json").read_text())["status"] == "completed"
