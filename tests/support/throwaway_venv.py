"""A virtualenv of its own for tests that install packages, so that nothing lands in the dev .venv.

    bin_dir = prime_venv(tmp_path / "venv")
    subprocess.run([bin_dir / "prime", "env", "install", "team/my-env"], ...)

It is made without pip and sees the dev environment's packages (pip, prime's dependencies, the example
environments) through a .pth file placed before nothing of its own: what pip installs in it lands in its
own site-packages and shadows the dev copies. prime is installed in it editable (`bin/prime` runs with
its interpreter, so `sys.executable -m pip` installs there). About 2 seconds.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

from tests.support.cli import REPO


def prime_venv(folder: Path) -> Path:
    """A venv at `folder` with `prime` in it; returns its bin folder."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True).stdout.strip()
    dev = sysconfig.get_paths()["purelib"]
    # addsitedir, not a bare path: the dev site-packages' own .pth files (editable installs) count too
    (Path(own) / "dev_site_packages.pth").write_text(f"import site; site.addsitedir({dev!r})\n")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                    "--no-build-isolation", "-e", str(REPO)], check=True, capture_output=True)
    return folder / "bin"


def site_packages(bin_dir: Path) -> Path:
    return Path(subprocess.run([str(bin_dir / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
