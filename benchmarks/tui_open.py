"""How long `prime eval tui` takes to show the first rows of a 100,000-rollout results.jsonl.

    python benchmarks/tui_open.py [--rows 100000] [--dir DIR]

Writes a run folder of ROWS rollouts (realistic rows, about 1 KB each) unless DIR already holds
one, then opens its results.jsonl headless at 120x40, the way `prime eval tui PATH/results.jsonl`
does, and reports the time from `make_app()` to the first frame that shows rows, and the time until
every row is loaded (sorting and filtering become available). Textual's import is timed apart.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LOREM = ("The quick brown fox jumps over the lazy dog while the model thinks about reversing text, "
         "counting letters, and checking its answer twice before it replies. ")


def write_run(run_dir: Path, rows: int, per_example: int = 4) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    meta = {"env_id": "bench-env", "model": "bench-model", "num_examples": rows // per_example,
            "rollouts_per_example": per_example, "date": "2026-01-01T00:00:00+00:00", "status": "completed",
            "avg_reward": 0.5, "avg_metrics": {"correct": 0.5, "format": 1.0}}
    (run_dir / "metadata.json").write_text(json.dumps(meta))
    with (run_dir / "results.jsonl").open("w") as fh:
        for i in range(rows):
            e, r = divmod(i, per_example)
            reward = ((e * 7 + r * 3) % 10) / 10
            row = {
                "example_id": e, "rollout_idx": r,
                "prompt": [{"role": "system", "content": LOREM * 2}, {"role": "user", "content": f"Question {e}: {LOREM}"}],
                "completion": [{"role": "assistant", "content": f"Answer {i}. {LOREM * 2}"}],
                "answer": str(e), "task": "bench", "info": {"i": i}, "reward": reward,
                "metrics": {"correct": float(reward > 0.5), "format": 1.0}, "error": None,
                "timing": {"generation_ms": 100.0, "scoring_ms": 1.0, "total_ms": 101.0},
                "is_completed": True, "is_truncated": False, "stop_condition": "single_turn_done",
                "token_usage": {"prompt_tokens": 120, "completion_tokens": 80}, "metrics_errors": [],
            }
            fh.write(json.dumps(row) + "\n")


async def measure(results: Path) -> dict[str, float]:
    t_import = time.perf_counter()
    from prime_cli.tui.app import make_app
    from prime_cli.tui.screens.rollouts import RolloutsScreen
    from prime_cli.tui.widgets.virtual_table import VirtualTable

    imported = time.perf_counter() - t_import
    painted: list[float] = []
    render_line = VirtualTable.render_line

    def timed_render_line(self: VirtualTable, y: int):  # the first row line handed to the compositor
        strip = render_line(self, y)
        if y >= 1 and not painted and "Answer 0." in "".join(seg.text for seg in strip):
            painted.append(time.perf_counter())
        return strip

    VirtualTable.render_line = timed_render_line
    start = time.perf_counter()
    app = make_app(results)
    loaded = None
    async with app.run_test(size=(120, 40)):
        while time.perf_counter() - start < 60:
            screen = app.screen
            if isinstance(screen, RolloutsScreen) and screen.model.loaded and screen.order is not None:
                loaded = time.perf_counter() - start
                break
            await asyncio.sleep(0.005)
        count = len(app.screen.model) if isinstance(app.screen, RolloutsScreen) else 0
    VirtualTable.render_line = render_line
    first_rows = painted[0] - start if painted else None
    return {"textual_import_s": imported, "first_rows_s": first_rows, "all_rows_loaded_s": loaded, "rows": count}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000, help="rollouts in the generated results.jsonl")
    parser.add_argument("--dir", type=Path, default=None, help="run folder to use (generated there when empty)")
    args = parser.parse_args()
    run_dir = args.dir or Path(tempfile.mkdtemp(prefix="tui-bench-")) / "run"
    if not (run_dir / "results.jsonl").is_file():
        t = time.perf_counter()
        write_run(run_dir, args.rows)
        print(f"wrote {args.rows:,} rows ({(run_dir / 'results.jsonl').stat().st_size / 1e6:.0f} MB) "
              f"in {time.perf_counter() - t:.1f} s to {run_dir}")
    result = asyncio.run(measure(run_dir / "results.jsonl"))
    print(f"textual import:           {result['textual_import_s']:.2f} s")
    print(f"first rows on screen:     {result['first_rows_s']:.2f} s after make_app()")
    print(f"all {result['rows']:,} rows loaded: {result['all_rows_loaded_s']:.2f} s (sort/filter/group ready)")
    if sys.platform != "win32":
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak memory:              {peak:.0f} MB")


if __name__ == "__main__":
    main()
