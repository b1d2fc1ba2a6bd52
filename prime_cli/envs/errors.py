"""Error types of the environment API.

Two families:
- `Error` and subclasses happen *during* a rollout (model failures, tool failures). They are caught
  by the rollout loop and recorded in `state["error"]`; the rollout ends, nothing is lost. A
  `FatalError` will hit every other rollout too (a rejected key, a server gone): its record says
  `"fatal": true` and the engines stop the run on it (`is_fatal`) instead of recording one failed
  rollout after another.
- `UserInputError` and subclasses are mistakes in what the user gave (a flag, a config file, a run
  folder, an endpoint registry, an environment). They are raised to the caller with a message that
  names the problem and the fix; the CLI turns them into one line and exit code 2. `EnvConfigError`
  is the kind for mistakes in an environment or its input (a bad dataset row, a missing
  `load_environment`, an argument it does not accept).
"""

from __future__ import annotations

import re
import traceback

# Bearer tokens and sk-/rk-/pk- style keys: masked in tracebacks (they hold messages of chained errors)
_SECRETISH = re.compile(r"(?i)(bearer\s+)\S+|\b(sk|rk|pk)-[A-Za-z0-9_\-]{6,}")
TRACEBACK_CHARS = 4000


class Error(Exception):
    """Base class of errors that end a rollout and are recorded in its state."""


class FatalError(Error):
    """A failure that no retry can fix and that every other rollout would hit too: the run stops."""


# Records written before the "fatal" key: their one fatal type (prime_cli.clients.errors.FatalEndpointError)
_FATAL_BEFORE_THE_FLAG = "FatalEndpointError"


class ModelError(Error):
    """The model call failed (after the client's retries)."""


class EmptyModelResponseError(ModelError):
    """The model returned neither content nor tool calls."""


class OverlongPromptError(ModelError):
    """The prompt does not fit the model's context. Ends the rollout as truncated, not as an error."""


class ToolError(Error):
    """Base class of tool failures."""


class ToolParseError(ToolError):
    """The model's tool-call arguments are not valid JSON or not an object."""


class ToolCallError(ToolError):
    """A tool raised while running."""


class InfraError(Error):
    """Something outside the model and the environment failed (a sandbox, a service)."""


class UserInputError(ValueError):
    """A mistake in what the user gave. Message says what and how to fix it; the CLI exits with 2."""


class EnvConfigError(UserInputError):
    """A mistake in an environment definition or its input. Message says what and how to fix it."""


class DatasetError(EnvConfigError):
    """A dataset row is malformed (no prompt/question, invalid info JSON, ...)."""


class RubricError(EnvConfigError):
    """A rubric is malformed (funcs/weights mismatch, a reward function asks for an unknown argument)."""


class EnvironmentLoadError(EnvConfigError):
    """`load_environment` could not find or call an environment."""


class EnvironmentNotInstalledError(EnvironmentLoadError):
    """`owner/my-env` is not installed; the message is the one command that installs it."""


def error_record(exc: BaseException) -> dict[str, str | bool]:
    """The JSON form of an error kept in state and results: its type name and message, and
    `"fatal": True` for a FatalError."""
    record: dict[str, str | bool] = {"type": type(exc).__name__, "message": str(exc) or type(exc).__name__}
    if isinstance(exc, FatalError):
        record["fatal"] = True
    return record


def is_fatal(record: dict[str, object] | None) -> bool:
    """Whether an error record (`error_record`'s form) ends the whole run."""
    if not record:
        return False
    return bool(record.get("fatal")) or record.get("type") == _FATAL_BEFORE_THE_FLAG


def traceback_text(exc: BaseException, limit: int = TRACEBACK_CHARS) -> str:
    """The formatted traceback of `exc` (chained causes included, no local variables), its last `limit`
    characters, with bearer tokens and API-key-like words masked. For logs: a rollout's state keeps it
    beside the error record, and no saved result field holds it."""
    text = mask_secrets("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    return text if len(text) <= limit else "..." + text[-limit:]


def mask_secrets(text: str) -> str:
    """`text` with bearer tokens and API-key-like words (sk-..., rk-..., pk-...) masked, for logs."""
    return _SECRETISH.sub(lambda m: (m.group(1) or "") + "***", text)
