import subprocess
import sys

from prime_cli import __version__


def run_prime(*args):
    return subprocess.run([sys.executable, "-m", "prime_cli", *args], capture_output=True, text=True)


def test_version():
    result = run_prime("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"prime {__version__}"


def test_help_explains_the_tool():
    result = run_prime("--help")
    assert result.returncode == 0
    assert "Usage: prime" in result.stdout and "--version" in result.stdout
