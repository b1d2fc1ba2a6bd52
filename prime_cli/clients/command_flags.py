"""The model flags of a printed command (resume, retry, "Use it"), so that it works when pasted."""

from __future__ import annotations

from pathlib import Path

LOCAL_MODEL = "local"
"""The built-in name of the embedded default model (`-m local`, the default)."""


def model_flags(model: str, base_url: str | None, key_var: str | None, endpoints_path: str | None,
                *, local: bool = False) -> list[str]:
    """`-m MODEL [-b URL] [-k VAR] [-e PATH]` as the user gave them: `-m local` for the embedded model
    (its server's URL lives only as long as this session), the registry path made absolute."""
    parts = ["-m", LOCAL_MODEL if local else model]
    if base_url and not local:
        parts += ["-b", base_url]
    if key_var:
        parts += ["-k", key_var]
    if endpoints_path:
        parts += ["-e", str(Path(endpoints_path).resolve())]
    return parts
