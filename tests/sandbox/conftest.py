"""What the sandbox tests need from the machine: dockerd running, the base image in each engine.

dockerd is started here when this runs as root, docker.io is installed and no daemon answers (and no
DOCKER_HOST points elsewhere), at import time: test modules decide their skips at collection, which
comes after this file is imported. It is stopped at the end of the session, and only if it was
started here. `PRIME_TEST_NO_DOCKERD=1` leaves the daemon alone.

Fixtures:
- `base_images`: {engine: image tag} for each container engine that answers, with the offline base image
  imported (built once per machine, cached; see prime_cli/sandbox/images.py).
- `container_image(engine)`: that engine's tag, or a skip naming why the engine cannot run.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENGINES = ("podman", "docker")


def _load_setup():
    spec = importlib.util.spec_from_file_location("prime_sandbox_setup", REPO / "scripts" / "sandbox_setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_setup = _load_setup()
_started_dockerd = None if os.environ.get("PRIME_TEST_NO_DOCKERD") else _setup.start_dockerd()


def pytest_sessionfinish(session, exitstatus):
    _setup.stop_dockerd(_started_dockerd)


def engine_unavailable(engine: str) -> str | None:
    from prime_cli.sandbox import get_provider

    return get_provider(engine).unavailable_reason()


@pytest.fixture(scope="session")
def base_images() -> dict[str, str]:
    from prime_cli.sandbox.images import ImageError, ensure_base_image

    images: dict[str, str] = {}
    for engine in ENGINES:
        if engine_unavailable(engine) is None:
            try:
                images[engine] = ensure_base_image(engine)
            except ImageError as exc:
                images[engine] = f"unavailable: {exc}"
    return images


@pytest.fixture
def container_image(base_images):
    """`container_image(engine)` -> the base image's tag in that engine, or a skip with the reason."""

    def image_for(engine: str) -> str:
        reason = engine_unavailable(engine)
        if reason is not None:
            pytest.skip(reason)
        tag = base_images.get(engine, "unavailable: not built")
        if tag.startswith("unavailable: "):
            pytest.skip(tag.removeprefix("unavailable: "))
        return tag

    return image_for
