"""A run's dollar cost from its token counts and the prices it was run with (metadata.json `cost`).

Prices are records `{"model", "input_per_million", "output_per_million", "source"}` (source: registry,
litellm, free, unknown), chosen by the engine when the run starts and saved with the run, so that
every reader (summary, TUI, compare) computes and shows the same numbers without a model lookup.

The cost record::

    {"total_usd": 0.0123 or None, "roles": {"student": {"usd", "prompt_tokens", "completion_tokens",
     "prices": [price, ...]}, "judge": {...}, "reflection": {...}}, "max_cost": 1.0, "cap_reached": false}

A role's `usd` (and the total) is None when tokens were spent on a model whose prices are unknown:
unknown is never shown as $0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

UNKNOWN_FIX = "add input_price and output_price (dollars per million tokens) to the model's entry in configs/endpoints.toml"


def _tokens(usage: Any, key: str) -> int:
    value = usage.get(key) if isinstance(usage, Mapping) else None
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0


def usage_cost(prompt_tokens: int, completion_tokens: int, price: Mapping[str, Any] | None) -> float | None:
    """Dollars for these tokens at `price`; None when the price is unknown (and tokens were used)."""
    if not prompt_tokens and not completion_tokens:
        return 0.0
    rates = (price or {}).get("input_per_million"), (price or {}).get("output_per_million")
    if not all(isinstance(r, (int, float)) and math.isfinite(r) for r in rates):
        return None
    return (prompt_tokens * rates[0] + completion_tokens * rates[1]) / 1_000_000


class RoleTally:
    """Tokens of one role, per model, added up as rows arrive."""

    def __init__(self) -> None:
        self.by_model: dict[str, list[int]] = {}

    def add(self, model: str, usage: Any) -> None:
        tally = self.by_model.setdefault(model, [0, 0])
        tally[0] += _tokens(usage, "prompt_tokens")
        tally[1] += _tokens(usage, "completion_tokens")

    def record(self, prices: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        usd: float | None = 0.0
        for model, (prompt, completion) in self.by_model.items():
            part = usage_cost(prompt, completion, prices.get(model))
            usd = None if usd is None or part is None else usd + part
        return {"usd": usd, "prompt_tokens": sum(t[0] for t in self.by_model.values()),
                "completion_tokens": sum(t[1] for t in self.by_model.values()),
                "prices": [dict(prices.get(m) or {"model": m, "source": "unknown"}) for m in self.by_model]}


def judge_usages(row: Mapping[str, Any]) -> Iterable[tuple[str, Any]]:
    """(judge model, usage) pairs of a row's `judge_usage` ({model: {prompt_tokens, completion_tokens}})."""
    usage = row.get("judge_usage")
    return usage.items() if isinstance(usage, Mapping) else ()


def cost_record(tallies: Mapping[str, RoleTally], prices: Mapping[str, Mapping[str, Mapping[str, Any]]],
                max_cost: float | None = None, cap_reached: bool = False) -> dict[str, Any]:
    """The cost record of tallied roles; `prices` maps role -> model -> price record."""
    roles = {role: tally.record(prices.get(role) or {}) for role, tally in tallies.items()
             if tally.by_model}
    parts = [r["usd"] for r in roles.values()]
    record: dict[str, Any] = {"total_usd": None if None in parts else sum(p for p in parts if p is not None),
                              "roles": roles}
    if max_cost is not None:
        record.update(max_cost=max_cost, cap_reached=cap_reached)
    return record


def rows_tallies(rows: Iterable[Mapping[str, Any]], student_model: str) -> dict[str, RoleTally]:
    """Student and judge tokens of eval rows (or GEPA rollout entries, which carry `usage`)."""
    student, judge = RoleTally(), RoleTally()
    student.by_model[student_model] = [0, 0]
    for row in rows:
        student.add(student_model, row.get("token_usage") if "token_usage" in row else row.get("usage"))
        for model, usage in judge_usages(row):
            judge.add(str(model), usage)
    return {"student": student, "judge": judge}


def row_cost(row: Mapping[str, Any], prices: Mapping[str, Mapping[str, Mapping[str, Any]]],
             student_model: str) -> float | None:
    """One row's dollars (student + judge); None when a price it needs is unknown."""
    return cost_record(rows_tallies([row], student_model), prices)["total_usd"]


def usd(value: float | None) -> str:
    """$0.42; sub-cent amounts with two significant digits ($0.0031); `unknown` for None."""
    if value is None:
        return "unknown"
    if value == 0 or value >= 0.01:
        return f"${value:,.2f}"
    if value < 1e-6:
        return "<$0.000001"
    from decimal import Decimal  # lazy: start-up

    return f"${format(Decimal(f'{value:.2g}'), 'f')}"  # $0.000037, never $3.7e-05


def _free_note(record: Mapping[str, Any]) -> str:
    notes = {p.get("note") or "free" for r in (record.get("roles") or {}).values() for p in r.get("prices") or []
             if p.get("source") == "free"}
    return ", ".join(sorted(notes))


def _price_text(price: Mapping[str, Any]) -> str:
    rates = price.get("input_per_million"), price.get("output_per_million")
    if price.get("source") == "free":
        return f"{price.get('model', '?')}: free, {price.get('note') or 'no prices'}"
    if not all(isinstance(r, (int, float)) for r in rates):
        return f"{price.get('model', '?')}: prices unknown"
    source = {"registry": "endpoint registry", "litellm": "LiteLLM's table"}.get(str(price.get("source")), "?")
    return f"{price.get('model', '?')}: {_rate(rates[0])} in / {_rate(rates[1])} out per 1M tokens, {source}"


def _rate(value: float) -> str:
    return "$" + f"{value:,.6f}".rstrip("0").rstrip(".")


def cost_text(record: Any) -> str | None:
    """`$0.42 (student $0.40, judge $0.02; M: $0.4 in / $1.6 out per 1M tokens, LiteLLM's table)`,
    `unknown (no prices for M: fix)`, `$0.00 (free: embedded model)`; None without a record."""
    if not isinstance(record, Mapping) or not isinstance(record.get("roles"), Mapping):
        return None
    roles = record["roles"]
    total = record.get("total_usd")
    prices = [p for r in roles.values() for p in r.get("prices") or [] if isinstance(p, Mapping)]
    if total is None:
        unknown = sorted({str(p.get("model", "?")) for p in prices if p.get("source") == "unknown"})
        known = [f"{role} {usd(r.get('usd'))}" for role, r in roles.items() if r.get("usd") is not None]
        registries = sorted({str(p["registry"]) for p in prices if p.get("source") == "unknown" and p.get("registry")})
        fix = UNKNOWN_FIX.replace("configs/endpoints.toml", " / ".join(registries)) if registries else UNKNOWN_FIX
        return (f"unknown (no prices for {', '.join(unknown)}: {fix})"
                + (f"; known part: {', '.join(known)}" if known else ""))
    free = _free_note(record)
    if not roles:
        return f"{usd(0.0)} (no model calls)"
    if total == 0 and free and all(p.get("source") == "free" for p in prices):
        text = f"{usd(0.0)} (free: {free})"
    else:
        parts = [f"{role} {usd(r.get('usd'))}" for role, r in roles.items()] if len(roles) > 1 else []
        text = f"{usd(total)} ({'; '.join([', '.join(parts)] * bool(parts) + list(dict.fromkeys(_price_text(p) for p in prices)))})"
    if record.get("max_cost") is not None:
        text += f"; cap {usd(record['max_cost'])}" + (" reached" if record.get("cap_reached") else "")
    return text


def total_of(record: Any) -> float | None:
    value = record.get("total_usd") if isinstance(record, Mapping) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
