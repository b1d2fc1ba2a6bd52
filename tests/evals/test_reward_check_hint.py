"""`prime eval run` on a run whose rewards are all equal points at `prime env check` (part of issue 33)."""

from tests.evals.cli_support import run_prime
from tests.support.scripted_server import ScriptedOpenAIServer, default_reply


def test_all_zero_rewards_print_the_env_check_command(tmp_path):
    # the parser reads <reversed_text> tags; a reply without them scores 0 on every reward function
    with ScriptedOpenAIServer(reply=lambda body: "the reversal, but without the tags") as server:
        done = run_prime(["eval", "run", "reverse-text", "-m", "m", "-b", server.url, "-n", "4", "-r", "2",
                          "-a", '{"answer_without_tags": false}'], tmp_path)
    assert done.returncode == 0, done.stderr
    line = next((line for line in done.stdout.splitlines() if line.startswith("Check the reward")), None)
    assert line is not None, done.stdout
    assert "all 8 rollouts got reward 0.0" in line
    assert "prime env check reverse-text -a '{\"answer_without_tags\": false}'" in line


def test_varied_rewards_print_no_hint(tmp_path):
    calls = iter(range(10**6))

    def uneven(body):  # a right reversal, cut in half on one request of three: rewards differ
        text = default_reply(body)
        return text if next(calls) % 3 else text[: len(text) // 2]

    with ScriptedOpenAIServer(reply=uneven) as server:
        done = run_prime(["eval", "run", "reverse-text", "-m", "m", "-b", server.url, "-n", "4", "-r", "2", "-c", "1"],
                         tmp_path)
    assert done.returncode == 0, done.stderr
    assert "every example scored the same" not in done.stdout and "[" in done.stdout.split("Reward: ")[1].split("\n")[0]
    assert "Check the reward" not in done.stdout and "prime env check" not in done.stdout


def test_a_perfect_run_is_not_told_to_check_its_reward(tmp_path):
    # every reply right: each of the 6 rollouts gets reverse-text's best, 1.2 (lcs 1.0 + 0.2 x format 1.0)
    with ScriptedOpenAIServer() as server:
        done = run_prime(["eval", "run", "reverse-text", "-m", "m", "-b", server.url, "-n", "3", "-r", "2"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Check the reward" not in done.stdout and "before blaming the model" not in done.stdout, done.stdout
    line = next((line for line in done.stdout.splitlines() if line.startswith("Same reward")), None)
    assert line is not None, done.stdout
    assert "all 6 rollouts got reward 1.2, at or above --pass-threshold 1.0" in line
    assert "no reward diversity" in line and "prime env check reverse-text" in line


def test_a_constant_reward_below_the_pass_threshold_is_still_checked(tmp_path):
    # tags around a character no answer has: format 1.0, lcs 0.0, so every rollout gets 0.2: never a pass, and never different
    with ScriptedOpenAIServer(reply=lambda body: "<reversed_text>#</reversed_text>") as server:
        done = run_prime(["eval", "run", "reverse-text", "-m", "m", "-b", server.url, "-n", "3", "-r", "2"], tmp_path)
    assert done.returncode == 0, done.stderr
    line = next((line for line in done.stdout.splitlines() if line.startswith("Check the reward")), None)
    assert line is not None and "all 6 rollouts got reward 0.2" in line, done.stdout
    # a threshold the constant reward reaches makes it a pass, not a suspect
    with ScriptedOpenAIServer(reply=lambda body: "<reversed_text>#</reversed_text>") as server:
        low = run_prime(["eval", "run", "reverse-text", "-m", "m", "-b", server.url, "-n", "3", "-r", "2",
                         "--pass-threshold", "0.2"], tmp_path)
    assert "Check the reward" not in low.stdout and "Same reward: all 6 rollouts got reward 0.2" in low.stdout
