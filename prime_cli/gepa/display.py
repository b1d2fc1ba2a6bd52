"""How a GEPA run reports itself: a rich live panel on a terminal, plain lines otherwise."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, Any

from prime_cli.display import protocol as base
from prime_cli.records.gepa_run import proposal_origin
from prime_cli.results.cost import usd
from prime_cli.runs.visible import visible

from .scored import format_score

if TYPE_CHECKING:  # rich is imported only when the live panel is used (--plain starts faster)
    from rich.panel import Panel


def _verdict(line: dict[str, Any], num_val: int | None = None) -> str:
    if line["accepted"]:
        rows = line.get("child_val_rows_run")
        why = ("it was below its parent on the first half" if line.get("child_val_cut") == "race"
               else "the budget left")
        part = f" (validated on {rows} of {num_val} rows: {why})" if rows and num_val and rows < num_val else ""
        return f"accepted as candidate {line['child_idx']}{part}"
    return f"rejected: {visible(line['reason'])}"  # a failed reflection quotes the server's words


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class GepaDisplay(base.Display):
    """GEPA's display protocol: the shared one plus each finished rollout and each committed iteration. It
    counts what happened (rollouts, the seed's validation pass) for every kind of display; use as a
    context manager. Before the first iteration is committed, progress is the seed's validation pass:
    rollouts done of those it needs, its mean reward so far (the best known), the rate and the ETA."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.snapshot: dict[str, Any] = {}
        self.rollouts = 0  # run this session
        self.seed_done = 0
        self.seed_scored = 0  # the seed's rollouts without an error: its mean so far is over these
        self.seed_reward = 0.0
        self.minibatch_rollouts = 0  # before the first commit: run for proposals not yet committed (not charged)
        self.spend: Callable[[], float | None] | None = None  # the dollars spent so far (gepa/cost.py), when known

    def spent_text(self) -> str:
        """` | spent $1.23`, or nothing when the spend is unknown or nothing was paid."""
        spent = self.spend() if self.spend is not None else None
        return f" | spent {usd(spent)}" if spent is not None else ""

    def rollout_done(self, entry: dict[str, Any] | None = None) -> None:
        self.rollouts += 1
        if entry is not None and not self.snapshot and entry.get("split") == "train":
            self.minibatch_rollouts += 1
        if entry is not None and not self.snapshot and entry.get("split") == "val" and self.seed_done < self.seed_total:
            self.seed_done += 1
            if entry.get("reward") is not None:  # an errored rollout is counted, never scored 0
                self.seed_scored += 1
                self.seed_reward += float(entry["reward"])
            self._seed_progress()

    def _seed_progress(self) -> None:
        """One more rollout of the seed's validation pass is done."""

    def update(self, **snapshot: Any) -> None:
        self.snapshot = snapshot

    @property
    def seed_total(self) -> int:
        return int(self.info.get("seed_rollouts") or 0)

    def progress(self) -> dict[str, Any]:
        """Budget and timing now: used/max_calls (the rollouts charged: before the first commit the seed's
        pass as far as it went; a proposal's minibatch rollouts are charged when it commits and counted
        apart, in_flight), rollouts/s this session, ETA of the seed's pass and of the whole budget (at this
        session's rate)."""
        elapsed = max(self.elapsed(), 1e-9)
        rate = self.rollouts / elapsed if self.rollouts else None
        max_calls = int(self.info.get("max_calls") or 0)
        used = self.snapshot.get("used", int(self.info.get("used") or 0) + self.seed_done)
        seed_left = self.seed_total - self.seed_done if not self.snapshot else 0
        in_flight = 0 if self.snapshot else self.minibatch_rollouts
        return {"used": used, "in_flight_rollouts": in_flight, "max_calls": max_calls, "rollouts": self.rollouts,
                "elapsed_s": round(elapsed, 1),
                "rate": round(rate, 3) if rate else None,
                "seed_done": self.seed_done, "seed_total": self.seed_total,
                "seed_mean": round(self.seed_reward / self.seed_scored, 4) if self.seed_scored else None,
                "seed_errored": self.seed_done - self.seed_scored,
                "seed_eta_s": round(seed_left / rate, 1) if rate and seed_left else None,
                "eta_s": round(max(max_calls - used, 0) / rate, 1) if rate else None,
                "cost_usd": self.spend() if self.spend is not None else None}

    def seed_line(self) -> str:
        p = self.progress()
        mean = format_score(p["seed_mean"])
        if p["seed_errored"]:
            mean += f" ({p['seed_errored']} errored, left out)"
        rate = f"{p['rate']:.2f}" if p["rate"] else "-"
        return (f"validating the seed prompt: {p['seed_done']}/{p['seed_total']} rollouts | best so far "
                f"(seed) {mean} | budget {p['used']}/{p['max_calls']} charged, {p['in_flight_rollouts']} in flight | "
                f"{rate} rollouts/s | "
                f"elapsed {_duration(p['elapsed_s'])} | ETA seed {_duration(p['seed_eta_s'])}, "
                f"budget {_duration(p['eta_s'])}{self.spent_text()}")


class PlainDisplay(GepaDisplay, base.PlainLines):
    """Lines for logs and pipes: during the seed's pass a progress line at most every `min_interval` seconds
    (and the first at once), then one line per iteration."""

    min_fraction = 0.0

    def header_lines(self, info: Mapping[str, Any]) -> list[str]:
        resumed = f" (resuming at {info['used']} rollouts)" if info.get("used") else ""
        header = (f"GEPA on {info['env_id']}: student {info['model']}, reflection {info['reflector']}, "
                  f"budget {info['max_calls']} rollouts{resumed}{self.written_to(info)}")
        if not self.seed_total:
            return [header]
        return [header, f"validating the seed prompt: 0/{self.seed_total} rollouts (progress every {self.min_interval:g}s)"]

    def _seed_progress(self) -> None:
        self._progress_line(self.seed_done, self.seed_total, self.seed_line())

    def update(self, **s: Any) -> None:
        super().update(**s)
        line = s["line"]
        eta = self.progress()["eta_s"]
        self._out(f"iteration {line['iteration']}: {proposal_origin(line)} {_verdict(line, s.get('num_val'))} | "
                  f"budget {s['used']}/{s['max_calls']} | best {format_score(s['best_score'])} (candidate {s['best_idx']}, "
                  f"seed {format_score(s['seed_score'])}) | {s['candidates']} candidate(s) | ETA {_duration(eta)}"
                  f"{self.spent_text()}")


class JsonDisplay(GepaDisplay, base.JsonLines):
    """--json: NDJSON events on stdout, as `prime eval run --json` writes them: start, progress (at most
    ~5/s), iteration, message; the `done` event is written by the caller at the end."""

    def start(self, **info: Any) -> None:
        super().start(**info)
        self._out(self._event("start", **info))

    def _seed_progress(self) -> None:
        self._progress_line(self.seed_done, self.seed_total, self._event("progress", phase="seed", **self.progress()))

    def update(self, **s: Any) -> None:
        super().update(**s)
        self._out(self._event("iteration", **{k: v for k, v in s.items() if k != "line"}, **s["line"],
                              eta_s=self.progress()["eta_s"], cost_usd=self.progress()["cost_usd"]))


class RichDisplay(GepaDisplay, base.LivePanel):
    """Budget bar, iteration, best score, and the last proposal's verdict."""

    name = "GEPA"

    def _running_panel(self) -> Panel:
        from rich.console import Group  # lazy: heavy
        from rich.panel import Panel  # lazy: heavy
        from rich.progress_bar import ProgressBar  # lazy: heavy
        from rich.table import Table  # lazy: heavy
        from rich.text import Text  # lazy: heavy

        info, s = self.info, self.snapshot
        max_calls = info["max_calls"]
        used = self.progress()["used"]
        bar = Table.grid(padding=(0, 1))
        bar.add_row(Text("budget", style="dim"), ProgressBar(total=max(max_calls, 1), completed=min(used, max_calls), width=30),
                    Text(f"{used}/{max_calls} rollouts"), Text(f"({self.rollouts} run this session)", style="dim"),
                    Text(f"elapsed {_duration(self.elapsed())}, ETA {_duration(self.progress()['eta_s'])}"
                         f"{self.spent_text().replace(' | ', ', ')}", style="dim"))
        parts: list[Any] = [bar]
        if s:
            line = s["line"]
            parts.append(Text.assemble(("iteration ", "dim"), (str(line["iteration"]), "bold"),
                                       ("   candidates ", "dim"), (str(s["candidates"]), "bold"),
                                       ("   in flight ", "dim"), (str(s["in_flight"]), "bold")))
            parts.append(Text.assemble(("best ", "dim"), (format_score(s["best_score"]), "bold green"),
                                       (f" (candidate {s['best_idx']})   seed ", "dim"), format_score(s["seed_score"])))
            style = "green" if line["accepted"] else "yellow"
            parts.append(Text.assemble(("last proposal ", "dim"), (f"#{line['iteration']} ({proposal_origin(line)}): ", ""),
                                       (_verdict(line, s.get("num_val")), style)))
        elif self.seed_total:
            parts.append(Text(self.seed_line(), style="dim"))
        title = Text(f"GEPA · {info['env_id']} · {info['model']} (reflection: {info['reflector']})")
        subtitle = Text(str(info["run_dir"])) if info.get("run_dir") else None
        return Panel(Group(*parts), title=title, title_align="left", subtitle=subtitle)


def make_display(mode: str | None = "auto", stream: IO[str] | None = None) -> GepaDisplay:
    kinds = {"rich": RichDisplay, "plain": PlainDisplay, "json": JsonDisplay}
    return base.make_display(mode, stream, kinds)  # type: ignore[return-value]
