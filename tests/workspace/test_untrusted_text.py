"""`prime env info` shows what an environment's code, pyproject and data hold as text: control characters
in its argument defaults, its eval defaults and the error that stopped its loading arrive escaped."""

from tests.evals.cli_support import run_prime
from tests.support.untrusted import SHOWN, raw_controls, write_env


def test_env_info_escapes_control_characters(tmp_path):
    write_env(tmp_path)
    result = run_prime(["env", "info", "evil-env"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert raw_controls(result.stdout + result.stderr) == []
    assert f"system_prompt: str = 'system {SHOWN}'" in result.stdout  # the system prompt default
    assert f"reward functions: score{SHOWN} (weight 1)" in result.stdout
    assert "note=see \\x1b]0;pwned\\x07\\x9b here" in result.stdout  # [tool.prime.eval] in its pyproject

    failed = run_prime(["env", "info", "evil-env", "-a", '{"fail": true}'], tmp_path)
    assert failed.returncode == 0, failed.stderr
    assert raw_controls(failed.stdout + failed.stderr) == []
    assert f"(RuntimeError: no data here {SHOWN})" in failed.stdout  # the environment's error
