"""The log file of a run (eval.log, gepa.log), with secrets redacted from every record."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path


class RedactSecrets(logging.Filter):
    def __init__(self, secrets: Sequence[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            message = record.getMessage()
            for secret in self.secrets:
                message = message.replace(secret, "***")
            record.msg, record.args = message, None
            if record.exc_info:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
                for secret in self.secrets:
                    record.exc_text = record.exc_text.replace(secret, "***")
                record.exc_info = None
        return True


@contextmanager
def run_log(path: Path | None, secrets: Sequence[str] = (), verbose: bool = False) -> Iterator[None]:
    """Send the `prime_cli` loggers to `path` for the duration of the block."""
    if path is None:
        yield
        return
    root = logging.getLogger("prime_cli")
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactSecrets(secrets))
    handler.setLevel(logging.DEBUG if verbose else logging.INFO)
    previous_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(previous_level)
        handler.close()
