"""Run ids: `YYYYmmdd-HHMMSS-<6 hex>`, sortable by creation time."""

from __future__ import annotations

import re
import secrets
import threading
import time
from datetime import datetime

RUN_ID_PATTERN = re.compile(r"^(\d{8}-\d{6})-([0-9a-f]{3})[0-9a-f]{3}$")
"""A run id: the creation second, then 3 hex of sub-second time and 3 random hex."""

_last_stamp: tuple[str, int] = ("", -1)
_stamp_lock = threading.Lock()


def new_run_id() -> str:
    """`YYYYmmdd-HHMMSS-<6 hex>`: 3 hex of sub-second time (1/4096 s), then 3 random hex. Ids sort
    by creation time (strictly within a process); a writer retries the rare collision."""
    global _last_stamp
    with _stamp_lock:
        while True:
            now = time.time()
            second = datetime.fromtimestamp(now).strftime("%Y%m%d-%H%M%S")
            frac = min(int((now % 1) * 4096), 4095)
            if second == _last_stamp[0] and frac <= _last_stamp[1]:
                if _last_stamp[1] == 4095:  # this second is used up: wait for the next one
                    time.sleep(0.001)
                    continue
                frac = _last_stamp[1] + 1
            _last_stamp = (second, frac)
            return f"{second}-{frac:03x}{secrets.token_hex(2)[:3]}"
