"""The model flags of a printed command (resume, retry, "Use it"), so that it works when pasted."""

from __future__ import annotations

from pathlib import Path

LOCAL_MODEL = "local"
"""The built-in name of the embedded default model (`-m local`, the default)."""
LOCAL_MOE_MODEL = "local-moe"
"""The built-in name of the small Mixture-of-Experts model upcycled from the embedded one."""
LOCAL_MODELS = (LOCAL_MODEL, LOCAL_MOE_MODEL)


def is_local_model(name: str | None) -> bool:
    """A built-in model that prime serves itself (a server is found or started for it)."""
    return name in LOCAL_MODELS


def model_flags(model: str, base_url: str | None, key_var: str | None, endpoints_path: str | None,
                *, local: bool | str = False) -> list[str]:
    """`-m MODEL [-b URL] [-k VAR] [-e PATH]` as the user gave them: `-m local` for the embedded model
    (its server's URL lives only as long as this session; `local` may name the built-in, e.g.
    "local-moe"), the registry path made absolute."""
    builtin = local if isinstance(local, str) else LOCAL_MODEL
    parts = ["-m", builtin if local else model]
    if base_url and not local:
        parts += ["-b", base_url]
    if key_var:
        parts += ["-k", key_var]
    if endpoints_path:
        parts += ["-e", str(Path(endpoints_path).resolve())]
    return parts
