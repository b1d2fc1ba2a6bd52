"""`prime train` end to end in seconds: the installed script in a subprocess, the real launcher,
orchestrator and trainer, a tiny Llama built from a config, and the scripted server in vLLM's place
(tests/support/fake_vllm/sitecustomize.py). The environment `flaky-reward` is written into the test's
working directory (./environments/flaky_reward/), with a reward function that can be made to raise.
"""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

from tests.support.cli import PRIME, REPO, prime_env

FAKE_VLLM = REPO / "tests" / "support" / "fake_vllm"
VOCAB = 50_000  # the scripted server's token ids are crc32(word) % 50_000

FLAKY_ENV = '''
import itertools

import prime_cli.envs as vf

_calls = itertools.count()


def load_environment(fail_every: int = 0, fail_first: int = 2, fail_all: bool = False):
    """Rows to repeat; the reward raises on `fail_first` of every `fail_every` calls (or on all)."""
    rows = [{"question": f"repeat: {word} {i}", "answer": word} for i, word in
            enumerate(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"])]

    def flaky_reward(completion, answer, **kwargs) -> float:
        n = next(_calls)
        if fail_all or (fail_every and n % fail_every < fail_first):
            raise ValueError("the reward function broke (a test fault)")
        return (n % 3) / 2

    return vf.SingleTurnEnv(dataset=rows, rubric=vf.Rubric(funcs=[flaky_reward]))
'''


def tiny_model(folder: Path) -> Path:
    """A 2-layer Llama with random weights whose vocabulary covers the scripted server's token ids."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512,
                         tie_word_embeddings=True, pad_token_id=0)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


def write_workspace(cwd: Path, model: Path, max_steps: int = 3, env_args: str = "{}", extra: str = "") -> Path:
    """./environments/flaky_reward/ and rl.toml (no output_dir: the default) in `cwd`; returns rl.toml."""
    env_dir = cwd / "environments" / "flaky_reward"
    env_dir.mkdir(parents=True, exist_ok=True)
    (env_dir / "flaky_reward.py").write_text(FLAKY_ENV)
    config = cwd / "rl.toml"
    config.write_text(textwrap.dedent(f"""\
        max_steps = {max_steps}
        seq_len = 256

        [model]
        name = "{model}"

        [trainer]
        micro_batch_size = 8

        [trainer.model.lora]
        rank = 4
        alpha = 8

        [trainer.ckpt]
        interval = 1

        [orchestrator]
        batch_size = 8
        rollouts_per_example = 4

        [orchestrator.sampling]
        max_tokens = 16

        [[orchestrator.env]]
        id = "flaky-reward"
        args = {env_args}

        [inference.model]
        max_model_len = 256
        """) + textwrap.dedent(extra))
    return config


def train_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    path = os.pathsep.join([str(FAKE_VLLM), str(REPO), str(REPO / "plugins" / "prime-lora")])
    return {"PRIME_TEST_FAKE_VLLM": "1", "PYTHONPATH": path, **(extra or {})}


def run_train(args: list[str], cwd: Path, timeout: float = 180,
              extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`prime train ARGS` as a user types it (stderr holds the run's lines)."""
    return subprocess.run([str(PRIME), "train", *args], cwd=cwd, env=prime_env(train_env(extra_env)),
                          capture_output=True, text=True, timeout=timeout)


class TrainProcess:
    """`prime train ARGS` in the background, to be signalled or raced."""

    def __init__(self, args: list[str], cwd: Path, extra_env: dict[str, str] | None = None):
        self.proc = subprocess.Popen([str(PRIME), "train", *args], cwd=cwd, env=prime_env(train_env(extra_env)),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)

    def wait_for(self, predicate, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if self.proc.poll() is not None:
                raise AssertionError(f"prime train ended early ({self.proc.returncode}): {self.proc.communicate()}")
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError("timed out waiting for the run")
            time.sleep(0.1)

    def finish(self, timeout: float = 120) -> tuple[int, str]:
        _, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.communicate()
