"""How long `prime eval tui` takes to open a 100,000-rollout run, with and without its side index.

    python benchmarks/tui_open.py [--rows 100000] [--dir DIR]

Writes a run folder of ROWS rollouts (realistic rows, about 1.4 KB each) unless DIR already holds
one, then opens its results.jsonl headless at 120x40, the way `prime eval tui PATH/results.jsonl`
does, twice, each in a fresh process: first with no results.index (the TUI parses every row, then
writes the index), then with the index it wrote. For each it reports the time from `make_app()` to
the first frame that shows rows, to sort and filter being ready (every row's small fields loaded
and the table's order built), to a sort by reward and a `reward<0.5` filter shown after that, and
the process's peak RSS. Textual's import is timed apart.

Before the index (commit f75d1be, the same machine, 2 shared cores): first rows 0.13 s, sort and
filter ready 7.25 s, 324 MB peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import subprocess
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


async def _wait_for(condition, start: float, limit: float = 120.0) -> float | None:
    while time.perf_counter() - start < limit:
        if condition():
            return time.perf_counter() - start
        await asyncio.sleep(0.005)
    return None


async def measure(results: Path) -> dict[str, float | None]:
    t_import = time.perf_counter()
    from prime_cli.tui.app import make_app
    from prime_cli.tui.filters import parse_filter
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
    sorted_s = filtered_s = None
    async with app.run_test(size=(120, 40)):
        def ready() -> bool:
            screen = app.screen
            return isinstance(screen, RolloutsScreen) and screen.model.loaded and screen.order is not None

        ready_s = await _wait_for(ready, start)
        screen = app.screen
        count = len(screen.model) if isinstance(screen, RolloutsScreen) else 0
        from_index = isinstance(screen, RolloutsScreen) and screen.model.from_index
        if ready_s is not None:
            before, t = screen.order, time.perf_counter()
            screen.sort_key, screen.descending = "reward", True
            screen.rebuild()
            sorted_s = await _wait_for(lambda: screen.order is not before, t)
            before, t = screen.order, time.perf_counter()
            screen.row_filter = parse_filter("reward<0.5")
            screen.rebuild()
            filtered_s = await _wait_for(lambda: screen.order is not before, t)
        await app.workers.wait_for_complete()  # the index write, when it parsed
    VirtualTable.render_line = render_line
    first_rows = painted[0] - start if painted else None
    peak = None
    if sys.platform != "win32":
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"textual_import_s": imported, "first_rows_s": first_rows, "ready_s": ready_s, "sort_s": sorted_s,
            "filter_s": filtered_s, "rows": count, "from_index": from_index, "peak_mb": peak}


def _measure_in_child(results: Path) -> dict:
    """One open in a fresh interpreter, so imports, caches and peak RSS start from nothing."""
    out = subprocess.run([sys.executable, __file__, "--measure", str(results)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _measure_baseline(ref: str, run_dir: Path) -> dict | None:
    """The same open with the code of git commit `ref` (its own tui_open.py, from `git archive`),
    for a side-by-side figure taken under the same machine load."""
    import re
    import tarfile

    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="tui-bench-base-") as tmp:
        archive = subprocess.run(["git", "-C", str(root), "archive", ref], check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        out = subprocess.run([sys.executable, str(Path(tmp) / "benchmarks" / "tui_open.py"), "--dir", str(run_dir)],
                             check=True, capture_output=True, text=True).stdout
    figures = {key: re.search(pattern, out) for key, pattern in (
        ("first_rows_s", r"first rows on screen:\s+([\d.]+) s"), ("ready_s", r"rows loaded: ([\d.]+) s"),
        ("peak_mb", r"peak memory:\s+([\d.]+) MB"))}
    return {key: float(m.group(1)) if m else None for key, m in figures.items()}


def _fmt(value: float | None, unit: str = "s") -> str:
    if value is None:
        return "-"
    return f"{value:.0f} MB" if unit == "MB" else f"{value:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000, help="rollouts in the generated results.jsonl")
    parser.add_argument("--dir", type=Path, default=None, help="run folder to use (generated there when empty)")
    parser.add_argument("--baseline", default=None, metavar="GIT_REF",
                        help="also open the run with the code of this commit, e.g. f75d1be (before the index)")
    parser.add_argument("--measure", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure is not None:
        print(json.dumps(asyncio.run(measure(args.measure))))
        return
    from prime_cli.results.row_index import INDEX_FILE

    run_dir = args.dir or Path(tempfile.mkdtemp(prefix="tui-bench-")) / "run"
    if not (run_dir / "results.jsonl").is_file():
        t = time.perf_counter()
        write_run(run_dir, args.rows)
        print(f"wrote {args.rows:,} rows ({(run_dir / 'results.jsonl').stat().st_size / 1e6:.0f} MB) "
              f"in {time.perf_counter() - t:.1f} s to {run_dir}")
    (run_dir / INDEX_FILE).unlink(missing_ok=True)
    base = _measure_baseline(args.baseline, run_dir) if args.baseline else None
    cold = _measure_in_child(run_dir / "results.jsonl")
    index_mb = (run_dir / INDEX_FILE).stat().st_size / 1e6 if (run_dir / INDEX_FILE).is_file() else 0.0
    warm = _measure_in_child(run_dir / "results.jsonl")
    print(f"textual import: {warm['textual_import_s']:.2f} s; results.index written by the first open: {index_mb:.1f} MB")
    head = f"{cold['rows']:,} rows"
    print(f"{head:<26}{'before (' + args.baseline + ')' if base else '':>18}{'no index':>18}{'with results.index':>22}")
    for label, key, unit in (("first rows on screen", "first_rows_s", "s"), ("sort + filter ready", "ready_s", "s"),
                             ("then sort by reward", "sort_s", "s"), ("then filter reward<0.5", "filter_s", "s"),
                             ("peak RSS", "peak_mb", "MB")):
        before = _fmt(base.get(key), unit) if base else ""
        print(f"{label:<26}{before:>18}{_fmt(cold[key], unit):>18}{_fmt(warm[key], unit):>22}")
    print("(no index: the TUI parses results.jsonl, then writes results.index for the next open)")
    if not base:
        print("before the index (f75d1be, measured earlier): first rows 0.13 s, sort + filter ready 7.25 s, peak RSS 324 MB;"
              " --baseline f75d1be measures it now")
    if not warm["from_index"]:
        print("note: the second open did not use the index")


if __name__ == "__main__":
    main()
