"""Map other tools' eval rows and run settings onto ours (schema.Rollout, schema.MetadataRecord).

What was read to learn their fields (github PrimeIntellect-ai/verifiers):
- verifiers 0.3.0 (tag v0.3.0): verifiers/utils/save_utils.py `state_to_output` (the results.jsonl
  row), verifiers/types.py `GenerateMetadata` (metadata.json), `ErrorData`, `_timing_record`.
- verifiers 0.4 / "v1" (main, Aug 2026): verifiers/v1/cli/output.py (traces.jsonl, configs/<cli>.json),
  verifiers/v1/trace.py `Trace` (rewards, metrics, info, errors, timing, nodes, calls),
  verifiers/v1/episode.py `Episode` (a line holding `traces` plus episode-level `errors`),
  verifiers/v1/configs/cli/eval.py `EvalConfig` (env, model, sampling, num_rollouts).

Fields with no place in our row are kept under the row's `info["source_fields"]`, so the TUI's
rollout view and exports still show them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prime_cli.records.eval_run import Rollout

SOURCE_FIELDS = "source_fields"

# verifiers 0.3 row keys that map onto ours one to one
_V03_SAME = ("prompt", "completion", "answer", "task", "reward", "is_completed", "is_truncated", "stop_condition")
# v1 trace keys mapped below (or too heavy to keep: `nodes` become prompt/completion, `calls` token usage)
_V1_MAPPED = {"task", "rewards", "metrics", "info", "errors", "timing", "ok", "is_completed", "stop_condition",
              "nodes", "calls", "state"}


def _error_record(error: Any) -> dict[str, str] | str | None:
    """verifiers' error objects ({"error"|"type", "message", ...}) as our {"type", "message"}."""
    if not error:
        return None
    if isinstance(error, dict):
        return {"type": str(error.get("type") or error.get("error") or "Error"),
                "message": str(error.get("message") or "")}
    return str(error)


def _span_ms(span: Any) -> float | None:
    if not isinstance(span, dict):
        return None
    if isinstance(span.get("duration"), (int, float)) and span["duration"]:
        return float(span["duration"]) * 1000
    start, end = span.get("start"), span.get("end")
    if isinstance(start, (int, float)) and isinstance(end, (int, float)) and end > start:
        return (end - start) * 1000
    return None


def _timing_ms(generation: Any, scoring: Any, total_s: Any) -> dict[str, float]:
    out = {"generation_ms": _span_ms(generation), "scoring_ms": _span_ms(scoring),
           "total_ms": float(total_s) * 1000 if isinstance(total_s, (int, float)) and total_s else None}
    return {key: value for key, value in out.items() if value is not None}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


# --- verifiers 0.3 (and older prime CLI) results.jsonl -------------------------------------------

def v03_row(raw: dict[str, Any], rollout_idx: int) -> Rollout:
    """One verifiers 0.3 results.jsonl row as ours. Its metrics are also copied to top-level keys
    (their compatibility); those copies are dropped."""
    row: dict[str, Any] = {"example_id": raw.get("example_id", raw.get("id")), "rollout_idx": rollout_idx}
    row.update((key, raw[key]) for key in _V03_SAME if key in raw)
    metrics = raw.get("metrics") if isinstance(raw.get("metrics"), dict) else {}
    row["metrics"] = {name: _number(value) for name, value in metrics.items()}
    info = dict(raw["info"]) if isinstance(raw.get("info"), dict) else {}
    row["info"] = info
    row["error"] = _error_record(raw.get("error"))
    timing = raw.get("timing")
    if isinstance(timing, dict):
        if any(key.endswith("_ms") for key in timing):  # verifiers <= 0.1 wrote milliseconds already
            row["timing"] = {k: float(v) for k, v in timing.items() if k.endswith("_ms") and _number(v) is not None}
        else:
            row["timing"] = _timing_ms(timing.get("generation"), timing.get("scoring"), timing.get("total"))
    usage = raw.get("token_usage")
    if isinstance(usage, dict):
        row["token_usage"] = {"prompt_tokens": int(usage.get("input_tokens", usage.get("prompt_tokens")) or 0),
                              "completion_tokens": int(usage.get("output_tokens", usage.get("completion_tokens"))
                                                       or 0)}
    known = set(_V03_SAME) | {"example_id", "id", "metrics", "info", "error", "timing", "token_usage", "rollout_idx"}
    rest = {key: value for key, value in raw.items() if key not in known and key not in metrics}
    if rest:
        info[SOURCE_FIELDS] = rest
    return row  # type: ignore[return-value]


V03_METADATA_RENAMES = {"id": "env_id"}


def v03_metadata(raw: dict[str, Any]) -> dict[str, Any]:
    """Their metadata.json: every key kept; `time` (seconds) also as our `time_ms`."""
    meta = {V03_METADATA_RENAMES.get(key, key): value for key, value in raw.items()}
    if _number(raw.get("time")) is not None and "time_ms" not in raw:
        meta["time_ms"] = float(raw["time"]) * 1000
    return meta


# --- verifiers 0.4 ("v1") traces.jsonl ----------------------------------------------------------

def v1_traces(line: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The traces of one traces.jsonl line: an Episode (its `traces`, which inherit the episode's
    errors) or a bare Trace. An episode that failed before any trace is one errored trace."""
    if "traces" not in line:
        yield line
        return
    errors = line.get("errors") or []
    traces = [t for t in line.get("traces") or [] if isinstance(t, dict)]
    if not traces:
        yield {"task": line.get("task") or {}, "errors": errors, "ok": False, "episode_id": line.get("id")}
    for trace in traces:
        yield {**trace, "errors": trace.get("errors") or errors, "episode_id": line.get("id")}


def v1_example_id(trace: dict[str, Any]) -> Any:
    task = trace.get("task") if isinstance(trace.get("task"), dict) else {}
    data = task.get("data") if isinstance(task.get("data"), dict) else {}
    for key in ("example_id", "id"):
        if data.get(key) is not None:
            return data[key]
    return task.get("key") or task.get("hash")


def _messages(nodes: list[Any]) -> tuple[list[Any], list[Any]]:
    """The last branch of the message graph (leaf to root by `parent`), split at the first message
    the model sampled: (prompt, completion)."""
    if not nodes:
        return [], []
    path, index, seen = [], len(nodes) - 1, set()
    while isinstance(index, int) and 0 <= index < len(nodes) and index not in seen:
        seen.add(index)
        node = nodes[index] if isinstance(nodes[index], dict) else {}
        path.append(node)
        index = node.get("parent")
    path.reverse()
    split = next((i for i, node in enumerate(path) if node.get("sampled")), len(path))
    return [n.get("message") for n in path[:split]], [n.get("message") for n in path[split:]]


def _usage(calls: list[Any]) -> dict[str, int] | None:
    usages = [c["usage"] for c in calls if isinstance(c, dict) and isinstance(c.get("usage"), dict)]
    if not usages:
        return None
    return {"prompt_tokens": sum(int(u.get("prompt_tokens") or 0) for u in usages),
            "completion_tokens": sum(int(u.get("completion_tokens") or 0) for u in usages)}


def v1_row(trace: dict[str, Any], rollout_idx: int) -> Rollout:
    """One verifiers v1 trace as our row. reward = the sum of its weighted rewards (score x weight);
    each reward's unweighted score is also a metric under its name."""
    task = trace.get("task") if isinstance(trace.get("task"), dict) else {}
    data = task.get("data") if isinstance(task.get("data"), dict) else {}
    rewards = {name: r for name, r in (trace.get("rewards") or {}).items()}
    scored = [r for r in rewards.values() if isinstance(r, dict) and _number(r.get("score")) is not None]
    metrics: dict[str, float | None] = {
        name: _number(r.get("score")) if isinstance(r, dict) else None for name, r in rewards.items()}
    metrics.update((name, _number(v)) for name, v in (trace.get("metrics") or {}).items())
    prompt, completion = _messages(trace.get("nodes") or [])
    errors = trace.get("errors") or []
    timing = trace.get("timing") if isinstance(trace.get("timing"), dict) else {}
    ends = [s.get("end") for s in timing.values() if isinstance(s, dict) and _number(s.get("end"))]
    start = _number(timing.get("start"))
    info = dict(trace["info"]) if isinstance(trace.get("info"), dict) else {}
    rest = {key: value for key, value in trace.items() if key not in _V1_MAPPED}
    rest["task"] = {key: value for key, value in task.items() if key != "data"}
    rest["task_data"] = {key: value for key, value in data.items() if key not in ("prompt", "answer", "task")}
    info[SOURCE_FIELDS] = rest
    row: dict[str, Any] = {
        "example_id": v1_example_id(trace),
        "rollout_idx": rollout_idx,
        "prompt": prompt or data.get("prompt"),
        "completion": completion,
        "answer": data.get("answer"),
        "task": data.get("task") or task.get("type"),
        "info": info,
        "reward": sum(float(r["score"]) * float(r.get("weight", 1.0)) for r in scored) if scored else None,
        "metrics": metrics,
        "error": _error_record(errors[-1]) if errors else (None if trace.get("ok", True) else "Error: not ok"),
        "timing": _timing_ms(timing.get("agent"), timing.get("scoring"),
                             max(ends) - start if ends and start is not None else None),
        "is_completed": bool(trace.get("is_completed")),
        "stop_condition": trace.get("stop_condition"),
        "token_usage": _usage(trace.get("calls") or []),
    }
    return row  # type: ignore[return-value]


def v1_metadata(config: dict[str, Any], folder_name: str) -> dict[str, Any]:
    """Our metadata fields from a v1 resolved eval config; the config itself is kept whole."""
    env = config.get("env") if isinstance(config.get("env"), dict) else {}
    taskset = env.get("taskset") if isinstance(env.get("taskset"), dict) else {}
    env_id = env.get("id") or taskset.get("id") or taskset.get("name") or folder_name.split("--")[0]
    client = config.get("client") if isinstance(config.get("client"), dict) else {}
    return {
        "env_id": str(env_id),
        "run_id": folder_name.rsplit("--", 1)[-1],  # <env>--<model>--<harness>--<id>: the id part
        "env_args": env.get("args") if isinstance(env.get("args"), dict) else {},
        "model": str(config.get("model") or "?"),
        "base_url": client.get("base_url"),
        "sampling_args": config.get("sampling") if isinstance(config.get("sampling"), dict) else {},
        "rollouts_per_example": config.get("num_rollouts"),
        "verifiers_config": config,
    }
