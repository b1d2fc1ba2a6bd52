"""The TUI shows what runs hold as text: prompts, completions, tool calls and results, answers, infos,
errors, task and metric names, GEPA prompts and reasons, and decoded training samples that hold
terminal control characters are painted with them escaped. Textual (through Rich) drops BEL and CR
but paints ESC and the C1 controls as they are, so without the escaping they would reach the terminal."""

import json
from pathlib import Path

from prime_cli.tui.app import make_app
from prime_cli.tui.screens.gepa import GepaScreen
from prime_cli.tui.screens.overview import OverviewScreen
from prime_cli.tui.screens.rollout import RolloutScreen
from prime_cli.tui.screens.rollouts import RolloutsScreen
from prime_cli.tui.screens.training import TrainingScreen
from prime_cli.tui.screens.training_step import StepSamplesScreen
from tests.support.untrusted import EVIL, SHOWN, raw_controls
from tests.tui import training_fixtures
from tests.tui.conftest import SIZE, screen_text, settle
from tests.tui.fixtures import eval_row, write_eval_run, write_gepa_run


def evil_row(example_id: int, rollout_idx: int, errored: bool = True) -> dict:
    row = eval_row(example_id, rollout_idx, 0.5, tools=True)
    row["prompt"][-1]["content"] = f"say {EVIL} please"
    row["completion"][0]["tool_calls"][0]["function"]["arguments"] = json.dumps({"text": EVIL})
    row["completion"][1].update(content=f"tool output {EVIL}", name=f"reverse{EVIL}[link=http://x]y[/link]")
    row["completion"][-1]["content"] = f"reply {EVIL} done"
    row.update(answer=f"answer {EVIL}", info={"note": f"info {EVIL}"}, task=f"task{EVIL}",
               metrics={f"score{EVIL}": 0.5}, stop_condition=f"stop{EVIL}",
               error={"type": f"Model{EVIL}Error", "message": f"the server said {EVIL}"} if errored else None)
    return row


def shown(app) -> str:
    text = screen_text(app)
    assert raw_controls(text) == [], raw_controls(text)
    return text


async def test_an_eval_run_is_painted_with_control_characters_escaped(tmp_path):
    run_dir = write_eval_run(tmp_path, [evil_row(0, 0), evil_row(0, 1, errored=False)])  # metrics of a scored row
    meta = json.loads((run_dir / "metadata.json").read_text())
    meta["env_args"] = {"system_prompt": f"system {EVIL}"}
    (run_dir / "metadata.json").write_text(json.dumps(meta))
    app = make_app(run_dir)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen)
        text = shown(app)
        assert f"score{SHOWN}" in text and f"Model{SHOWN}Error" in text and f"stop: stop{SHOWN}" in text
        await pilot.press("r")
        await settle(pilot)
        assert isinstance(app.screen, RolloutsScreen)
        assert "reply \\x1b[2J" in shown(app)  # the completion's preview (cut to the column)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, RolloutScreen)
        text = shown(app)
        for expected in (f"say {SHOWN} please", f"tool output {SHOWN}", f"reply {SHOWN} done", f"answer {SHOWN}",
                         f"tool result · reverse{SHOWN}[link=http://x]y[/link]",  # not markup either
                         f"Model{SHOWN}Error: the server said",
                         '"note": "info \\u001b[2J\\u001b]0;pwned\\u0007\\u009b31m\\rX"',  # JSON's own escapes
                         f"task{SHOWN}"[:20]):  # cut to the column
            assert expected in text, expected


def evil_text(value):
    if isinstance(value, str):
        return value.replace("Check the first letter.", f"Check {EVIL} the first letter.")
    if isinstance(value, dict):
        return {k: evil_text(v) for k, v in value.items()}
    return [evil_text(v) for v in value] if isinstance(value, list) else value


async def test_a_gepa_run_is_painted_with_control_characters_escaped(tmp_path):
    run_dir = write_gepa_run(tmp_path)
    for name in ("candidates.jsonl", "iterations.jsonl", "pareto_frontier.jsonl"):
        rows = [evil_text(json.loads(line)) for line in (run_dir / name).read_text().splitlines()]
        if name == "iterations.jsonl":
            rows[1]["reason"] = f"reflection failed: {EVIL}"
        (run_dir / name).write_text("".join(json.dumps(row) + "\n" for row in rows))
    (run_dir / "best_prompt.txt").write_text(evil_text((run_dir / "best_prompt.txt").read_text()))
    app = make_app(run_dir)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, GepaScreen)
        await pilot.press("down")  # candidate 1: its diff against the seed
        await settle(pilot)
        assert f"+Check {SHOWN} the first letter." in shown(app)
        await pilot.press("3")
        await settle(pilot)
        assert f"reflection failed: {SHOWN}"[:40] in shown(app)
        await pilot.press("4")
        await settle(pilot)
        assert "Check \\x1b[2J\\x1b]0;pwned\\x07\\x9b31m" in shown(app)  # best_prompt.txt (read as text: CR is a newline)


async def test_training_samples_and_error_kinds_are_painted_escaped(tmp_path, monkeypatch):
    words = [f"▁ok{EVIL}" if w == "▁ok" else w for w in training_fixtures.WORDS]
    monkeypatch.setattr(training_fixtures, "WORDS", words)
    out = training_fixtures.write_training_run(
        Path(tmp_path) / "run", steps=2, tokenizer=True,
        step_stats={2: {"error_rate": 0.25, f"error_rate/reward:{EVIL}": 0.25, "rollouts_sampled": 4}})
    app = make_app(out)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, TrainingScreen)
        assert f"reward:{SHOWN} 1" in shown(app)  # the errors card
        await pilot.press("down", "enter")
        await settle(pilot)
        assert isinstance(app.screen, StepSamplesScreen)
        text = shown(app)
        assert f"ok{SHOWN}" in text and f"reward:{SHOWN}" in text  # the decoded sample, the title
