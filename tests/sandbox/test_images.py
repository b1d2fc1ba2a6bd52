"""The offline base image: present in the engines after the build, and unpacked as bwrap's root filesystem."""

from __future__ import annotations

import asyncio

import pytest

from prime_cli.sandbox import get_provider, images
from prime_cli.sandbox.spec import SandboxSpec


def test_the_base_image_is_present_and_an_unknown_one_is_not(base_images):
    for engine, tag in base_images.items():
        if not tag.startswith("unavailable"):
            assert images.image_present(engine, tag)
            assert not images.image_present(engine, "localhost/prime-no-such-image:0")
    assert not images.image_present("no-such-engine-cli")


def test_the_unpacked_base_image_is_a_bwrap_root_filesystem(base_images):
    reason = get_provider("bwrap").unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    if not images.tarball_path().is_file():
        pytest.skip(f"the base image is not built ({images.tarball_path()} missing): make test builds it as root")

    async def scenario():
        sandbox = await get_provider("bwrap").start(SandboxSpec(image=str(images.ensure_base_rootfs())))
        try:
            result = await sandbox.exec(["python3", "-c", "import sympy, numpy, sys; print(sympy.sqrt(8), sys.prefix)"])
            assert result.stdout.strip() == "2*sqrt(2) /usr", result.stderr
        finally:
            await sandbox.close()

    asyncio.run(scenario())
