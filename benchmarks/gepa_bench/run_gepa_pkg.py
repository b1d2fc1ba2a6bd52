"""The `gepa` package (0.1.4) side of benchmarks/gepa_vs_gepa.py. Runs in benchmarks/.venv-gepa.

    python run_gepa_pkg.py SPEC.json   ->  one JSON line: best_val, test, seed_test, metric_calls, wall_s

The adapter is what a user would write for gepa.optimize: the candidate's system prompt plus
the row's question go to the student (a thread pool of -c workers, the same concurrency prime
gets); the score is the exact match; the reflective dataset shows the input, the output and
feedback with the expected answer. The reflection model is called through a plain callable.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import gepa
from gepa.core.adapter import EvaluationBatch


def chat(url: str, model: str, messages: list[dict], **sampling) -> dict:
    body = json.dumps({"model": model, "messages": messages, **sampling}).encode()
    request = urllib.request.Request(url + "/chat/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())["choices"][0]


class SimAdapter:
    propose_new_texts = None

    def __init__(self, url: str, concurrency: int) -> None:
        self.url = url
        self.pool = ThreadPoolExecutor(concurrency)

    def _one(self, prompt: str, row: dict) -> tuple[str, float]:
        messages = ([{"role": "system", "content": prompt}] if prompt else []) + [{"role": "user", "content": row["question"]}]
        output = (chat(self.url, "student", messages)["message"].get("content") or "").strip()
        return output, 1.0 if output == row["answer"] else 0.0

    def evaluate(self, batch, candidate, capture_traces=False):
        results = list(self.pool.map(lambda row: self._one(candidate["system_prompt"], row), batch))
        outputs = [o for o, _ in results]
        scores = [s for _, s in results]
        trajectories = [{"row": row, "output": o, "score": s} for row, (o, s) in zip(batch, results, strict=True)] if capture_traces else None
        return EvaluationBatch(outputs=outputs, scores=scores, trajectories=trajectories)

    def make_reflective_dataset(self, candidate, eval_batch, components_to_update):
        records = [{"Inputs": t["row"]["question"], "Generated Outputs": t["output"],
                    "Feedback": f"Score {t['score']}. The expected answer is: {t['row']['answer']}"}
                   for t in eval_batch.trajectories]
        return {name: records for name in components_to_update}


class Quiet:
    def log(self, *args, **kwargs) -> None:
        pass


def main() -> None:
    spec = json.loads(open(sys.argv[1]).read())
    adapter = SimAdapter(spec["url"], spec["concurrency"])

    def reflection_lm(prompt) -> str:
        messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        return chat(spec["url"], "reflector", messages, **spec["reflection_sampling_args"])["message"].get("content") or ""

    start = time.perf_counter()
    result = gepa.optimize(
        seed_candidate={"system_prompt": spec["seed_prompt"]}, trainset=spec["train"], valset=spec["val"],
        adapter=adapter, reflection_lm=reflection_lm, max_metric_calls=spec["budget"],
        reflection_minibatch_size=spec["minibatch_size"], skip_perfect_score=True, perfect_score=1.0,
        seed=spec["seed"], logger=Quiet(), display_progress_bar=False)
    best = result.best_candidate["system_prompt"]
    test = adapter.evaluate(spec["test"], {"system_prompt": best}).scores
    seed_test = adapter.evaluate(spec["test"], {"system_prompt": spec["seed_prompt"]}).scores
    wall = time.perf_counter() - start
    print(json.dumps({"best_val": max(result.val_aggregate_scores), "test": sum(test) / len(test),
                      "seed_test": sum(seed_test) / len(seed_test), "metric_calls": result.total_metric_calls,
                      "num_candidates": len(result.candidates), "wall_s": wall, "best_prompt": best}))


if __name__ == "__main__":
    main()
