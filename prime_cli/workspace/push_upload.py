"""twine, used as a library by `prime env push`: the metadata check and the upload.

In-process rather than `twine upload` in a child: the credentials stay in memory (a child would need
them in its argv or environment), and the failures arrive as exceptions to turn into one line.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator
from pathlib import Path

from .errors import WorkspaceError
from .index_client import refused, unreachable
from .indexes import PackageIndex, redact
from .push_project import shown


@contextlib.contextmanager
def _twine_quiet() -> Iterator[io.StringIO]:
    """twine prints and logs for a terminal; its lines are captured (and only ever shown as our own)."""
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    logger = logging.getLogger("twine")
    logger.addHandler(handler)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield log
    finally:
        logger.removeHandler(handler)


def metadata_warnings(files: list[Path]) -> list[str]:
    """twine's metadata check: problems raise, warnings are returned (once each)."""
    from twine.commands.check import check  # lazy: heavy

    with _twine_quiet() as log:
        failed = check([str(path) for path in files])
    messages = list(dict.fromkeys(line.strip() for line in log.getvalue().splitlines() if line.strip()))
    if failed:
        raise WorkspaceError(f"twine check found a metadata problem in {shown(files[0].parent)}: {'; '.join(messages)}")
    return messages


def _already_there(status: int, text: str) -> bool:
    return status == 409 or (status == 400 and any(word in text.lower() for word in ("exist", "already")))


def upload(files: list[Path], index: PackageIndex) -> None:
    from twine.commands.upload import upload as twine_upload  # lazy: heavy
    from twine.exceptions import TwineException  # lazy: heavy
    from twine.settings import Settings  # lazy: heavy

    # an index without authentication still gets a user and password: twine will not upload without them
    user, password = index.credentials() or ("anonymous", "anonymous")
    settings = Settings(repository_url=index.upload_url, username=user, password=password, non_interactive=True,
                        disable_progress_bar=True)
    kept = f"; the built files are kept in {shown(files[0].parent)}"
    try:
        with _twine_quiet():
            twine_upload(settings, [str(path) for path in files])
    except OSError as exc:  # requests' errors are OSErrors: an HTTP error has a response, a connection error none
        response = getattr(exc, "response", None)
        if response is None:
            raise WorkspaceError(str(unreachable(index, type(exc).__name__)) + kept) from None
        status, reason, text = response.status_code, response.reason or "", response.text or ""
        if status in (401, 403):
            raise WorkspaceError(str(refused(index, status)) + kept) from None
        if _already_there(status, reason + " " + text):
            raise WorkspaceError(f"index {index.describe()} already has this version (HTTP {status} {reason}); a "
                                 f"version cannot be replaced: raise it and push again{kept}") from None
        detail = " ".join(text.split())[:160]
        raise WorkspaceError(redact(f"index {index.describe()} refused the upload (HTTP {status} {reason}"
                                    f"{': ' + detail if detail else ''}){kept}", [password])) from None
    except TwineException as exc:
        raise WorkspaceError(redact(f"twine could not upload to {index.describe()}: {exc}{kept}", [password])) from None
