"""`prime train` with a teacher, for real, through the installed `prime` (the embedded SmolLM2):

- SFT on a teacher's rollouts: a scripted teacher server plays reverse-text, half its answers exact (reward 1),
  half cut short; with min_reward 1 only the exact ones are trained on, the loss on the teacher's words alone
  (the environment's few-shot turns are context). The teacher has a server of its own: no vLLM is started.
- On-policy distillation: the student (the base model) samples on the run's vLLM, which also serves a LoRA
  adapter as the teacher; every sampled token's teacher log-prob is that adapter's (checked with peft), each
  token's advantage is teacher_tau x (teacher - student log-prob), and teacher_kl is a metric of every step.
"""

from __future__ import annotations

import json
import math
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from prime_cli.serve.server import free_port
from tests.evals.cli_support import run_prime
from tests.support.scripted_server import ScriptedOpenAIServer, content_text

from .conftest import REPO

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
RUN_TIMEOUT_S = 900
ENV = 'id = "reverse-text"\nargs = { plain_text = true, min_words = 3, max_words = 5 }'


def batches(out: Path, steps: int) -> list[dict]:
    return [json.loads(line) for step in range(1, steps + 1)
            for line in (out / "rollouts" / f"step_{step}" / "batch.jsonl").read_text().splitlines()]


def metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def tokenizer():
    from transformers import AutoTokenizer

    from prime_cli.serve.embedded import ensure_embedded_model

    return AutoTokenizer.from_pretrained(str(ensure_embedded_model()))


class Teacher:
    """The exact reversal of a sentence the first time it is asked, half of it the second time."""

    def __init__(self):
        self.calls: Counter[str] = Counter()

    def __call__(self, body) -> str:
        sentence = content_text(body["messages"][-1]["content"])
        self.calls[sentence] += 1
        return sentence[::-1] if self.calls[sentence] % 2 else sentence[::-1][: len(sentence) // 2]


def test_sft_on_a_teachers_rollouts_trains_exactly_on_its_rewarded_answers(tmp_path, prime_cache):
    with ScriptedOpenAIServer(Teacher()) as teacher:
        config = tmp_path / "teacher-sft.toml"
        config.write_text(textwrap.dedent(f"""
            max_steps = 2
            seq_len = 512

            [model]
            name = "local"

            [trainer.model.lora]
            rank = 4
            alpha = 8

            [orchestrator]
            batch_size = 4
            rollouts_per_example = 2

            [orchestrator.teacher_rollout_model]
            min_reward = 1.0

            [orchestrator.teacher_rollout_model.client]
            base_url = "{teacher.url}"

            [orchestrator.teacher_rollout_model.model]
            name = "teacher"

            [[orchestrator.env]]
        """) + ENV + "\n\n[inference.model]\nmax_model_len = 512\n")
        out = tmp_path / "run"
        proc = run_prime(["train", str(config), "-o", str(out)], REPO, {"PRIME_CACHE_DIR": str(prime_cache)},
                         timeout=RUN_TIMEOUT_S)
        asked = len(teacher.requests_to("/v1/chat/completions"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert not (out / "logs" / "inference.log").exists()  # the teacher has its own server: no vLLM
    rows = metrics(out)
    assert [r["step"] for r in rows] == [1, 2] and all(math.isfinite(r["loss"]) for r in rows)
    assert all(r["teacher_kept"] >= 4 - r["teacher_carried"] and r["teacher_filtered"] > 0 for r in rows)
    assert sum(r["rollouts_sampled"] for r in rows) == asked
    assert "teacher reward" in proc.stderr
    samples = batches(out, 2)
    assert len(samples) == 8 and all(s["reward"] == 1.0 for s in samples)
    tok = tokenizer()
    for sample in samples:
        trained = tok.decode([t for t, m in zip(sample["input_ids"], sample["loss_mask"], strict=True) if m])
        prompt = tok.decode(sample["input_ids"][: sample["loss_mask"].index(1)])
        sentence = prompt.rsplit("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]
        assert trained == sentence[::-1] + "<|im_end|>"  # the teacher's exact reversal, nothing of the prompt
        assert prompt.count("<|im_start|>assistant") == 3  # two few-shot answers (context) and the header


@pytest.fixture(scope="module")
def teacher_adapter(tmp_path_factory):
    """A LoRA adapter of the embedded model with random weights (a teacher that differs from the student)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from prime_cli.serve.embedded import ensure_embedded_model

    folder = tmp_path_factory.mktemp("teacher") / "adapter"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(ensure_embedded_model()), dtype=torch.float32)
    peft_model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                                                  init_lora_weights=False)).eval()
    peft_model.save_pretrained(str(folder))
    return folder, peft_model


def test_distillation_scores_every_sampled_token_with_the_teacher_adapter_served_beside_the_policy(
        tmp_path, prime_cache, teacher_adapter):
    adapter, peft_model = teacher_adapter
    config = tmp_path / "distill.toml"
    config.write_text(textwrap.dedent(f"""
        max_steps = 2
        seq_len = 512

        [model]
        name = "local"

        [trainer.loss]
        teacher_tau = 1.0
        adv_tau = 0.0

        [trainer.model.lora]
        rank = 4
        alpha = 8

        [orchestrator]
        batch_size = 4
        rollouts_per_example = 2

        [orchestrator.sampling]
        max_tokens = 24

        [orchestrator.teacher_model]
        adapter = "{adapter}"

        [[orchestrator.env]]
    """) + ENV + "\n\n[inference.model]\nmax_model_len = 512\n")
    out = tmp_path / "run"
    proc = run_prime(["train", str(config), "-o", str(out), "--set", f"inference.port={free_port()}"], REPO,
                     {"PRIME_CACHE_DIR": str(prime_cache)}, timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = metrics(out)
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["teacher_kl"] > 0.01 for r in rows), [r["teacher_kl"] for r in rows]  # the teacher differs
    samples = batches(out, 2)
    for sample in samples:
        for m, t, i, a in zip(sample["loss_mask"], sample["teacher_logprobs"], sample["inference_logprobs"],
                              sample["token_advantages"], strict=True):
            assert a == pytest.approx(t - i if m else 0.0, abs=1e-6)  # adv_tau 0: the teacher alone
    sample = samples[0]
    with torch.no_grad():
        ids = torch.tensor([sample["input_ids"]])
        logprobs = peft_model(ids).logits.float().log_softmax(-1)[0, :-1].gather(-1, ids[0, 1:, None]).squeeze(-1)
    trained = [i for i, m in enumerate(sample["loss_mask"]) if m]
    worst = max(abs(logprobs[i - 1].item() - sample["teacher_logprobs"][i]) for i in trained)
    print(f"teacher_kl per step {[round(r['teacher_kl'], 4) for r in rows]}; max |peft - served teacher| {worst:.2e}")
    assert worst < 1e-3, f"the served teacher is not the adapter: max |peft - teacher| = {worst:.2e}"
