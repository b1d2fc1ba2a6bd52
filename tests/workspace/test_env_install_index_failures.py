"""`prime env install OWNER/NAME` where things go wrong: sdists to build with a token (never in any
process's argv), a package without the environment's module, a wheel pip cannot use, an index that stops
answering mid-install. Each index here is a fresh pypiserver holding only what its test puts there."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support.cli import run_prime
from tests.support.package_index import PackageIndexServer
from tests.support.throwaway_venv import prime_venv, site_packages
from tests.workspace.test_env_install_index import endpoints, one_error_line, prime_in


def tiny_dist(root: Path, name: str, module: str, *, dependencies: tuple[str, ...] = (), sdist_only: bool = False,
              version: str = "0.1.0") -> list[Path]:
    """The files of a one-module setuptools project `name` whose module is `module`."""
    folder = root / f"src-{name}"
    folder.mkdir(parents=True)
    deps = ", ".join(f'"{dep}"' for dep in dependencies)
    (folder / "pyproject.toml").write_text(
        f'[build-system]\nrequires = ["setuptools>=70.1"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{name}"\nversion = "{version}"\ndependencies = [{deps}]\n\n'
        f'[tool.setuptools]\npy-modules = ["{module}"]\n')
    (folder / f"{module}.py").write_text("def load_environment(**kwargs):\n    raise NotImplementedError\n")
    out = root / f"dist-{name}"
    kind = ["--sdist"] if sdist_only else []
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", *kind, "--outdir", str(out), str(folder)],
                   check=True, capture_output=True)
    return sorted(out.iterdir())


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    return prime_venv(tmp_path_factory.mktemp("venv") / "venv")


class ArgvWatch:
    """Reads every process's command line (/proc/*/cmdline) in a loop, noting any that holds `secret`."""

    def __init__(self, secret: str) -> None:
        self.secret = secret.encode()
        self.seen: list[str] = []
        self.pip_children = 0  # pip processes seen: the watch did watch
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        pips: set[str] = set()
        while not self._stop.is_set():
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if self.secret in argv:
                    self.seen.append(argv.replace(b"\0", b" ").decode(errors="replace"))
                if b"pip\0install" in argv:
                    pips.add(pid)
            self._stop.wait(0.003)
        self.pip_children = len(pips)

    def __enter__(self) -> ArgvWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads command lines from /proc")
def test_sdists_built_with_a_token_never_put_it_in_a_command_line(tmp_path, venv):
    """The environment and its dependency exist only as sdists on a private index: both are built, and no
    process (pip, pip's build children) ever has the token in its argv."""
    with PackageIndexServer(tmp_path / "packages", {"alice": "tok-" + os.urandom(12).hex()}) as index:
        index.add(*tiny_dist(tmp_path, "leak-helper", "leak_helper", sdist_only=True),
                  *tiny_dist(tmp_path, "leak-env", "leak_env", dependencies=("leak-helper",), sdist_only=True))
        endpoints(tmp_path, index.endpoints_table("team", token_var="TEAM_TOKEN", user=index.user))
        with ArgvWatch(index.token) as watch:  # no wheel cache: pip really builds both
            result = prime_in(venv, ["env", "install", "team/leak-env"], tmp_path,
                              {"TEAM_TOKEN": index.token, "PIP_NO_CACHE_DIR": "1"})
    assert result.returncode == 0, result.stderr
    assert watch.seen == [] and watch.pip_children >= 2
    assert (site_packages(venv) / "leak_helper.py").is_file() and (site_packages(venv) / "leak_env.py").is_file()


def test_a_package_without_the_environments_module_is_one_line(tmp_path, venv):
    with PackageIndexServer(tmp_path / "packages") as index:
        index.add(*tiny_dist(tmp_path, "odd-env", "something_else"))
        endpoints(tmp_path, index.endpoints_table("lab"))
        line = one_error_line(prime_in(venv, ["env", "install", "lab/odd-env"], tmp_path))
    assert line == (f"error: odd-env==0.1.0 on index lab ({index.simple_url}) does not contain module odd_env "
                    "(prime loads environment odd-env from module odd_env); it is installed but cannot be used")


def test_a_pip_failure_is_one_line_with_pips_reason(tmp_path):
    """A wheel for another platform: pip cannot use it (nothing is installed, so the dev `prime` runs)."""
    with PackageIndexServer(tmp_path / "packages") as index:
        wheel = next(f for f in tiny_dist(tmp_path, "far-env", "far_env") if f.suffix == ".whl")
        index.add(wheel.rename(wheel.with_name("far_env-0.1.0-py3-none-win_arm64.whl")))
        endpoints(tmp_path, index.endpoints_table("lab"))
        line = one_error_line(run_prime(["env", "install", "lab/far-env"], tmp_path, {"HOME": str(tmp_path)}))
    assert line == "error: pip could not install far-env==0.1.0 (index lab): No matching distribution found for far-env==0.1.0"


class AnswersOnce:
    """A package index that lists one wheel of `project` once, then stops listening (connection refused)."""

    def __init__(self, project: str, filename: str) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.simple_url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/simple/"
        self.page = f'<html><body><a href="/packages/{filename}">{filename}</a></body></html>'.encode()
        self._thread = threading.Thread(target=self._serve_once, daemon=True)
        self._thread.start()

    def _serve_once(self) -> None:
        connection, _ = self.listener.accept()
        self.listener.close()  # before answering: every later request is refused
        with connection:
            connection.recv(65536)
            connection.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\nContent-Length: "
                               + str(len(self.page)).encode() + b"\r\n\r\n" + self.page)


def test_an_index_that_stops_answering_mid_install_is_one_line(tmp_path):
    index = AnswersOnce("gone-env", "gone_env-0.1.0-py3-none-any.whl")
    endpoints(tmp_path, f'[[index]]\nname = "flaky"\nurl = "{index.simple_url}"\n')
    result = run_prime(["env", "install", "flaky/gone-env"], tmp_path, {"HOME": str(tmp_path), "PIP_RETRIES": "2"})
    assert one_error_line(result) == (f"error: index flaky ({index.simple_url}) stopped answering while pip "
                                      "installed gone-env==0.1.0; is it running?")
