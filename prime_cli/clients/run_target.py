"""What an eval and a GEPA search run on: the environment (its id and arguments) and the model it calls,
where that is served (-m, -b, -k, -e). The config block both share; field names are the TOML keys (in
this order in their key lists)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, PrivateAttr

from .command_flags import LOCAL_MODEL, is_local_model


class RunTarget(BaseModel):
    env_id: str
    env_args: dict[str, Any] = Field(default_factory=dict)
    model: str = LOCAL_MODEL
    base_url: str | None = None
    api_key_var: str | None = None
    endpoints_path: str | None = None
    # set by `serve_locally`: the built-in name (`local`, `local-moe`) of the model where a server of this
    # session serves it (saved with the run, so that a resume goes back to it rather than to that server's URL)
    _builtin_name: str | None = PrivateAttr(default=None)

    @property
    def served_local(self) -> bool:
        """The model is a built-in one on a server this session started or found."""
        return self._builtin_name is not None

    @property
    def builtin_name(self) -> str | None:
        """The built-in name the user gave (`local`, `local-moe`) when a local server serves it."""
        return self._builtin_name

    def wants_builtin(self) -> bool:
        """A built-in model named without a URL: its server is found or started for the run."""
        return is_local_model(self.model) and not self.base_url

    def serve_locally(self, builtin: str | None) -> None:
        """Mark this (already repointed) config as served locally as `builtin`, or not (None)."""
        self._builtin_name = builtin
