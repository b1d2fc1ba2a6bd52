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
