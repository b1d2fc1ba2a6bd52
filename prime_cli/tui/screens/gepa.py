"""GEPA run: candidates with validation scores and lineage, each prompt's diff against its parent,
the Pareto frontier per validation row, the iterations, and the best prompt."""

from __future__ import annotations

import difflib
from pathlib import Path

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static, TabbedContent, TabPane

from prime_cli.records.gepa_run import GepaRun, proposal_origin, read_gepa_run
from prime_cli.results.eval_reader import metadata_mtime
from prime_cli.runs.status import RunStatus
from prime_cli.runs.visible import visible
from prime_cli.tui.style import fmt, short_date, signed, status_text

HELP = """Candidates in creation order (0 is the seed). ★ marks the best; 'front' counts the validation
rows on which a candidate is among the best (the Pareto frontier). The pane on the right shows
the selected candidate's lineage, scores, and its prompt as a diff against its parent.
1-4 switch tabs: candidates, frontier, iterations, best prompt. c copies the selected prompt."""


def prompt_diff(parent: str, child: str) -> Text:
    """A line diff of two prompts, additions green and removals red (control characters escaped)."""
    parent, child = visible(parent, multiline=True), visible(child, multiline=True)
    text = Text()
    for line in difflib.unified_diff(parent.splitlines(), child.splitlines(), "parent", "candidate", lineterm="", n=3):
        style = "green" if line.startswith("+") else "red" if line.startswith("-") else "cyan" if line.startswith("@@") else ""
        if line.startswith(("+++", "---")):
            style = "bold"
        text.append(line + "\n", style=style)
    return text if text.plain else Text("(same text as its parent)", style="dim")



def shared_gain(child: list, parent: list) -> float | None:
    """The child's mean minus its parent's, over the validation rows both were scored on (a candidate validated
    in part is not compared on other rows than its own)."""
    rows = [i for i, (c, p) in enumerate(zip(child, parent, strict=False)) if c is not None and p is not None]
    return sum(child[i] - parent[i] for i in rows) / len(rows) if rows else None

class GepaScreen(Screen):
    HELP_TITLE = "GEPA run"
    HELP_TEXT = HELP
    BINDINGS = [
        Binding("1", "tab('candidates')", "Candidates"),
        Binding("2", "tab('frontier')", "Frontier"),
        Binding("3", "tab('iterations')", "Iterations"),
        Binding("4", "tab('best')", "Best prompt"),
        Binding("c", "copy_prompt", "Copy prompt"),
    ]

    def __init__(self, run_dir: Path) -> None:
        super().__init__()
        self.run_dir = Path(run_dir)
        self.run: GepaRun = read_gepa_run(self.run_dir)
        self._mtime = metadata_mtime(self.run_dir)
        self.selected = 0

    def compose(self) -> ComposeResult:
        yield Static(id="title", classes="title")
        with TabbedContent(initial="candidates"):
            with TabPane("Candidates", id="candidates"), Horizontal():
                yield DataTable(id="cand-table", cursor_type="row")
                with VerticalScroll(id="cand-detail"):
                    yield Static(id="cand-text")
            with TabPane("Frontier", id="frontier"):
                yield DataTable(id="frontier-table", cursor_type="row")
            with TabPane("Iterations", id="iterations"):
                yield DataTable(id="iter-table", cursor_type="row")
            with TabPane("Best prompt", id="best"), VerticalScroll():
                yield Static(id="best-text")
        yield Static("", id="status", classes="status")
        yield Footer()

    def on_mount(self) -> None:
        cand = self.query_one("#cand-table", DataTable)
        cand.add_columns("idx", "parent", "iter", "val mean", "Δ parent", "front", "calls")
        self.query_one("#frontier-table", DataTable).add_columns("val row", "best score", "# best", "candidates")
        self.query_one("#iter-table", DataTable).add_columns(
            "iter", "parent", "minibatch", "parent", "child", "accepted", "reason", "child", "calls", "time s")
        self.fill()
        cand.focus()
        self.set_interval(self.app.live_interval, self.follow)

    def follow(self) -> None:
        """Live mode: re-read a run that is still being written."""
        if self.run.status != RunStatus.RUNNING:
            return
        mtime = metadata_mtime(self.run_dir)
        sizes = sum(p.stat().st_size for p in self.run_dir.glob("*.jsonl"))
        if (mtime, sizes) != getattr(self, "_seen", None):
            self._seen = (mtime, sizes)
            self.run = read_gepa_run(self.run_dir)
            self.fill()

    def fill(self) -> None:
        run, meta = self.run, self.run.metadata
        self.query_one("#title", Static).update(Text.assemble(
            (visible(f"GEPA · {meta.get('env_id', '?')} · {meta.get('model', '?')} · {self.run_dir.name}"), "bold"),
            "  ", status_text(run.status),
            visible(f"  {short_date(str(meta.get('created_at', '')))}  reflection {meta.get('reflection_model', '?')}")
            + f"  best #{fmt(run.best_idx)} val {fmt(meta.get('best_score'))} (seed {fmt(meta.get('seed_val_score'))})"
            f"  test {fmt(meta.get('seed_test_score'))} → {fmt(meta.get('best_test_score'))}"
            f"  calls {fmt(meta.get('total_metric_calls'))}/{fmt(meta.get('max_calls'))}" + self._errored()
            + self._pick(), *self._ending()))
        front = run.frontier_counts()
        table = self.query_one("#cand-table", DataTable)
        table.clear()
        for cand in run.candidates:
            parent = run.candidate(cand.parent) if cand.parent is not None else None
            gain = shared_gain(cand.val_scores, parent.val_scores) if parent else None
            star = "★ " if cand.idx == run.best_idx else ""
            table.add_row(f"{star}{cand.idx}", fmt(cand.parent), str(cand.iteration), fmt(cand.val_mean),
                          signed(gain), str(front.get(cand.idx, 0)), fmt(cand.discovered_at_calls))
        if run.candidates:
            table.move_cursor(row=min(self.selected, len(run.candidates) - 1))
        self._fill_frontier()
        self._fill_iterations()
        self.query_one("#best-text", Static).update(Text(visible(run.best_prompt_text() or "(no best prompt yet)",
                                                                 multiline=True)))
        self.show_candidate(min(self.selected, max(len(run.candidates) - 1, 0)))

    def _errored(self) -> str:
        """`  errored 41/93 left out`: the rollouts that errored, counted and never scored 0."""
        record = self.run.metadata.get("errored_rollouts")
        if not isinstance(record, dict) or not record.get("left_out"):
            return ""
        return f"  errored {fmt(record.get('left_out'))}/{fmt(record.get('rollouts'))} left out"

    def _pick(self) -> str:
        """How the final pick (gepa/picking.py) chose the best, when it re-rolled any duel."""
        pick = self.run.metadata.get("pick")
        duels = [d for d in (pick or {}).get("duels") or [] if isinstance(d, dict)]
        if not duels:
            return ""
        best, leader = pick.get("best"), pick.get("leader_by_validation")
        chosen = f" over #{fmt(leader)}" if best != leader else ""
        fights = ", ".join(f"#{fmt(d.get('challenger'))} vs #{fmt(d.get('leader'))} {_lead(d.get('challenger_lead'))} "
                           f"on {fmt(d.get('rows_rerun'))} re-rolled rows" for d in duels)
        return (f"\nfinal pick #{fmt(best)}{chosen} (the best by validation): {fights}; on "
                f"{fmt(pick.get('score_rollouts'))} + {fmt(pick.get('fresh_rollouts'))} fresh rollouts")

    def _ending(self) -> tuple[tuple[str, str], ...]:
        """Why the run ended other than by its budget: an early stop, or the error that failed it."""
        meta = self.run.metadata
        if meta.get("error") and self.run.status != RunStatus.RUNNING:
            return (("\nerror: " + visible(meta["error"], multiline=True), "red"),)
        if meta.get("stop_reason") and self.run.status == RunStatus.COMPLETED:
            return (("\nstopped before the budget: " + visible(meta["stop_reason"], multiline=True), "yellow"),)
        return ()

    def _fill_frontier(self) -> None:
        table = self.query_one("#frontier-table", DataTable)
        table.clear()
        for row in self.run.frontier:
            idxs = [str(p.get("candidate_idx")) for p in row.get("best_prompts") or [] if isinstance(p, dict)]
            table.add_row(fmt(row.get("valset_row")), fmt(row.get("best_score")), fmt(row.get("num_best_prompts")),
                          ", ".join(idxs))

    def _fill_iterations(self) -> None:
        table = self.query_one("#iter-table", DataTable)
        table.clear()
        for it in self.run.iterations:
            def mean(values: object) -> str:
                nums = [v for v in values or [] if isinstance(v, (int, float))] if isinstance(values, list) else []
                return fmt(sum(nums) / len(nums)) if nums else "–"
            accepted = bool(it.get("accepted"))
            table.add_row(fmt(it.get("iteration")), proposal_origin(it).removeprefix("parent "),
                          ",".join(str(r) for r in it.get("minibatch_rows") or []),
                          mean(it.get("parent_minibatch_scores")), mean(it.get("child_minibatch_scores")),
                          Text("yes", style="green") if accepted else Text("no", style="red"),
                          visible(it.get("reason") or ""), fmt(it.get("child_idx")), fmt(it.get("metric_calls")),
                          fmt(it.get("time_s"), 1))

    def show_candidate(self, position: int) -> None:
        if not self.run.candidates:
            self.query_one("#cand-text", Static).update(Text("no candidates yet", style="dim"))
            return
        self.selected = position
        cand = self.run.candidates[position]
        lineage = " → ".join(f"#{i}" for i in self.run.lineage(cand.idx))
        scores = " ".join(fmt(s, 2) for s in cand.val_scores)
        parent = self.run.candidate(cand.parent) if cand.parent is not None else None
        body = prompt_diff(parent.prompt, cand.prompt) if parent else \
            Text(visible(cand.prompt, multiline=True))
        self.query_one("#cand-text", Static).update(Group(
            Text.assemble(("candidate ", "bold"), f"#{cand.idx}", ("  lineage ", "bold"), lineage),
            Text.assemble(("validation ", "bold"), f"mean {fmt(cand.val_mean)}  per row: {scores}",
                          (f"  ({cand.val_errored} errored rollouts left out; – : a row whose rollouts all errored)", "dim")
                          if cand.val_errored else "",
                          (f"  (validated on {cand.val_rows_run} of {len(cand.val_scores)} rows: what the budget left, "
                           "or half when it was below its parent there; – : a row not run)", "dim") if cand.val_rows_run is not None
                          and cand.val_rows_run < len(cand.val_scores) else ""),
            Text(f"diff against parent #{cand.parent}" if parent else "seed prompt", style="bold underline"),
            body,
        ))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "cand-table":
            self.show_candidate(event.cursor_row)

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        table = {"candidates": "#cand-table", "frontier": "#frontier-table", "iterations": "#iter-table"}.get(tab)
        if table:
            self.query_one(table, DataTable).focus()

    def action_copy_prompt(self) -> None:
        if self.query_one(TabbedContent).active == "best":
            text = self.run.best_prompt_text()
        elif self.run.candidates:
            text = self.run.candidates[self.selected].prompt
        else:
            return
        self.app.copy_to_clipboard(text)
        self.query_one("#status", Static).update("copied the prompt to the clipboard")


def _lead(value: object) -> str:
    return f"{value:+.1f}" if isinstance(value, (int, float)) else "–"
