"""Reads back what an offline W&B run wrote: the records of its `run-ID.wandb` file.

wandb 0.19+ has no Python reader for it (its Go core writes it), so this follows the file's layout:
a 7-byte header (`:W&B`, a magic number, a version) then LevelDB's log format: 32 KiB blocks of chunks,
each `crc32 (4) | length (2, little-endian) | type (1: full, 2: first, 3: middle, 4: last)`, each chunk
a piece of one protobuf `Record` (wandb.proto.wandb_internal_pb2).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

BLOCK = 32 * 1024
HEADER = 7
CHUNK_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list[Any]:
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    found, pending, offset = [], b"", HEADER
    while offset + CHUNK_HEADER <= len(data):
        left_in_block = BLOCK - offset % BLOCK
        if left_in_block < CHUNK_HEADER:  # the block's tail is padding
            offset += left_in_block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[offset:offset + CHUNK_HEADER])
        piece = data[offset + CHUNK_HEADER:offset + CHUNK_HEADER + length]
        offset += CHUNK_HEADER + length
        if kind == 0 and length == 0:
            break  # zero padding at the end
        pending = piece if kind in (FULL, FIRST) else pending + piece
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            found.append(record)
            pending = b""
    return found


def history(run_dir: Path) -> list[tuple[int, dict[str, Any]]]:
    """(step, {key: value}) for each wandb.log call of the offline run in `run_dir`."""
    (path,) = run_dir.glob("run-*.wandb")
    rows = []
    for record in records(path):
        if record.WhichOneof("record_type") == "history":
            items = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            rows.append((items.get("_step", record.history.step.num), items))  # wandb's step is the item _step
    return rows


def run_config(run_dir: Path) -> dict[str, Any]:
    """The config the run was started with (wandb.init's `config`), merged over its config records."""
    (path,) = run_dir.glob("run-*.wandb")
    config: dict[str, Any] = {}
    for record in records(path):
        kind = record.WhichOneof("record_type")
        updates = record.run.config.update if kind == "run" else record.config.update if kind == "config" else []
        for item in updates:
            config[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    return config
