"""What a model's tokens cost: dollars per million prompt and completion tokens, and where that came from.

A registry entry's own `input_price` / `output_price` win; else LiteLLM's price table (the JSON file
litellm ships, read directly: milliseconds, never fetched, litellm itself is not imported); the
embedded model and an unpriced `-b` server cost nothing; anything else is unknown (never $0).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .command_flags import is_local_model
from .registry import EndpointSpec, default_registry_path, is_local_url, load_registry

REGISTRY, LITELLM, FREE, UNKNOWN = "registry", "litellm", "free", "unknown"
UNPRICED_SERVER = "-b server without prices"
"""A remote -b server no table prices: shown as free (the issue's rule for -b servers), but a --max-cost
on it could never be reached, so the cap refuses it as an unknown price."""


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens of one model (None when unknown) and their source."""

    model: str
    input_per_million: float | None
    output_per_million: float | None
    source: str  # registry | litellm | free | unknown
    note: str = ""  # which registry file, "embedded model", "-b server"
    registry: str = ""  # an unknown price: the endpoint registry in use, where its prices would go

    def record(self) -> dict[str, Any]:
        record = {"model": self.model, "input_per_million": self.input_per_million,
                  "output_per_million": self.output_per_million, "source": self.source}
        record = {**record, "note": self.note} if self.note else record
        return {**record, "registry": self.registry} if self.registry else record

    def in_registry(self, path: str | os.PathLike[str] | None) -> Price:
        """An unknown price that names the registry in use (`path`, else the default one) as where its
        prices would go; any other price as it is."""
        if self.source != UNKNOWN:
            return self
        return replace(self, registry=str(path or default_registry_path()))


def unknown_price_refusal(max_cost: float, models: list[str], registry: str | os.PathLike[str] | None) -> str:
    """The one line `--max-cost` is refused with when a price is unknown; it names the registry in use
    (`registry`, else the default one) as where the prices go."""
    return (f"--max-cost {max_cost:g}: the price of {', '.join(models)} is unknown (not in LiteLLM's table); "
            f"add input_price and output_price (dollars per million tokens) to its entry in "
            f"{registry or default_registry_path()}, or leave out --max-cost")


@functools.lru_cache(maxsize=1)
def price_table() -> dict[str, Any]:
    """LiteLLM's model price table: the file litellm ships (model_names.model_table), else
    `litellm.model_cost` (read locally)."""
    from .model_names import model_table  # lazy: already loaded

    if table := model_table():
        return table
    try:
        from .providers import import_litellm  # lazy: already loaded

        return dict(import_litellm().model_cost)
    except Exception:  # noqa: BLE001 - no table: every model not priced in the registry is unknown
        return {}


def _per_million(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    return round(float(value) * 1_000_000, 10)  # 4e-07 per token is 0.4, not 0.39999999999999997


def table_price(model: str) -> tuple[float, float] | None:
    """(input, output) dollars per million tokens from LiteLLM's table: the name as given, then without
    its provider prefix (anthropic/claude-sonnet-4-... -> claude-sonnet-4-...); None when neither is there."""
    table = price_table()
    names = [model]
    prefix, slash, rest = model.partition("/")
    if slash and rest:
        from .providers import provider_of  # lazy: already loaded

        if provider_of(model):
            names.append(rest)
    for name in names:
        entry = table.get(name)
        if not isinstance(entry, dict):
            continue
        prices = _per_million(entry.get("input_cost_per_token")), _per_million(entry.get("output_cost_per_token"))
        if prices[0] is not None and prices[1] is not None:
            return prices[0], prices[1]
    return None


def _from_table(name: str, model: str) -> Price:
    found = table_price(model)
    if found is None:
        return Price(name, None, None, UNKNOWN)
    return Price(name, found[0], found[1], LITELLM)


def price_of_specs(name: str, specs: list[EndpointSpec], *, local: bool = False,
                   base_url: str | None = None, registry_path: str | os.PathLike[str] | None = None) -> Price:
    """The price of `-m name` as resolved to `specs` (the first replica's registry prices win).
    `local`: served by the embedded model. `base_url`: the -b the user gave. `registry_path`: the -e
    registry (else the default one), named by an unknown price as where its prices would go."""
    return _price_of_specs(name, specs, local, base_url).in_registry(registry_path)


def _price_of_specs(name: str, specs: list[EndpointSpec], local: bool, base_url: str | None) -> Price:
    spec = specs[0] if specs else None
    if spec is not None and spec.input_price is not None and spec.output_price is not None:
        return Price(name, spec.input_price, spec.output_price, REGISTRY, "endpoint registry")
    if local or is_local_model(name):
        return Price(name, 0.0, 0.0, FREE, "embedded model")
    if spec is not None and (spec.kind == "litellm" or spec.registered):
        return _from_table(name, spec.model)
    if base_url and is_local_url(base_url):
        return Price(name, 0.0, 0.0, FREE, "-b server on this machine")
    if spec is None:
        return Price(name, None, None, UNKNOWN)
    priced = _from_table(name, spec.model)  # e.g. -m gpt-4.1-mini -b https://api.openai.com/v1
    return priced if priced.source == LITELLM else Price(name, 0.0, 0.0, FREE, UNPRICED_SERVER)


def unknown_for_a_cap(price: Price) -> bool:
    """A price a --max-cost cannot be kept with: unknown, or a remote -b server without prices."""
    return price.source == UNKNOWN or price.note == UNPRICED_SERVER


def price_of_name(name: str, registry_path: str | os.PathLike[str] | None = None) -> Price:
    """The price of a model named inside an environment (a judge): its registry entry, else the table."""
    where = Path(registry_path) if registry_path else default_registry_path()
    if where.is_file():
        try:
            registry = load_registry(where)
        except Exception:  # noqa: BLE001 - a registry the run itself did not need: price by the table
            registry = {}
        # an endpoint id, else an entry serving that model id (an environment may pass the entry's model on)
        entries = registry.get(name) or [s for specs in registry.values() for s in specs
                                         if s.model == name and s.input_price is not None]
        if entries:
            return price_of_specs(name, entries, registry_path=where)
    if is_local_model(name):
        return Price(name, 0.0, 0.0, FREE, "embedded model")
    return _from_table(name, name).in_registry(where)


def judge_models(rubric: Any, seen: set[int] | None = None) -> list[str]:
    """The judge models an environment's rubric calls (JudgeRubric, also inside a RubricGroup)."""
    seen = seen if seen is not None else set()
    if rubric is None or id(rubric) in seen:
        return []
    seen.add(id(rubric))
    found = [rubric.judge_model] if isinstance(getattr(rubric, "judge_model", None), str) else []
    for inner in getattr(rubric, "rubrics", None) or []:
        found += judge_models(inner, seen)
    return list(dict.fromkeys(found))
