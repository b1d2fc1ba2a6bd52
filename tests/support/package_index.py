"""A real package index for tests: pypiserver on a free loopback port, serving the files of one folder.

    with PackageIndexServer(tmp_path / "packages", users={"alice": token}) as index:
        endpoints.write_text(index.endpoints_table("team", token_var="TEAM_TOKEN", user="alice"))

Without users it needs no authentication at all; with users, every upload, download and listing needs
one of them (an htpasswd file written next to the packages folder). `--disable-fallback` keeps it from
redirecting unknown projects to PyPI, as a team's own index would. A stopped server starts again on the
same port, so a test can take the index down and bring it back.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from pathlib import Path

START_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PackageIndexServer:
    def __init__(self, folder: Path, users: dict[str, str] | None = None, protects: str = "update,download,list") -> None:
        """`protects`: the actions that need the users' credentials (pypiserver's -a), when there are users."""
        self.folder = Path(folder)
        self.users = dict(users or {})
        self.protects = protects
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"  # twine uploads here
        self.simple_url = self.url + "simple/"  # pip reads here
        self._process: subprocess.Popen | None = None

    @property
    def user(self) -> str | None:
        return next(iter(self.users), None)

    @property
    def token(self) -> str | None:
        """The first user's password: what a test exports as the index token."""
        return self.users[self.user] if self.user else None

    @property
    def htpasswd(self) -> Path:
        return self.folder.parent / f"{self.folder.name}.htpasswd"

    def _command(self) -> list[str]:
        server = Path(sys.executable).parent / "pypi-server"
        command = [str(server), "run", "-p", str(self.port), "-i", "127.0.0.1", "--disable-fallback"]
        if self.users:
            command += ["-a", self.protects, "-P", str(self.htpasswd)]
        else:
            command += ["-a", ".", "-P", "."]
        return command + [str(self.folder)]

    def _write_htpasswd(self) -> None:
        with warnings.catch_warnings():  # passlib imports the crypt module, deprecated since Python 3.11
            warnings.simplefilter("ignore", DeprecationWarning)
            from passlib.apache import HtpasswdFile

        passwords = HtpasswdFile(str(self.htpasswd), new=True)
        for user, password in self.users.items():
            passwords.set_password(user, password)
        passwords.save()

    def start(self) -> PackageIndexServer:
        if self._process is not None:
            return self
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.users:
            self._write_htpasswd()
        self._process = subprocess.Popen(self._command(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                error = self._process.stderr.read().decode(errors="replace") if self._process.stderr else ""
                self._process = None
                raise RuntimeError(f"pypi-server exited at start:\n{error[-2000:]}")
            if self._answers():
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"pypi-server did not answer on {self.simple_url} within {START_TIMEOUT_S:.0f} s")

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(self.simple_url, timeout=2):
                return True
        except urllib.error.HTTPError:  # 401 with users: it is up
            return True
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr:
            process.stderr.close()

    def __enter__(self) -> PackageIndexServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add(self, *files: Path) -> None:
        """Publish built files by putting them in the served folder (what an upload ends with)."""
        for file in files:
            shutil.copy2(file, self.folder / Path(file).name)

    def endpoints_table(self, name: str, token_var: str | None = None, user: str | None = None,
                        visibility: str | None = None) -> str:
        """The `[[index]]` table of configs/endpoints.toml that names this server `name`."""
        lines = ["[[index]]", f'name = "{name}"', f'url = "{self.simple_url}"', f'upload_url = "{self.url}"']
        if user is not None:
            lines.append(f'user = "{user}"')
        if token_var is not None:
            lines.append(f'token = "{token_var}"')
        if visibility is not None:
            lines.append(f'visibility = "{visibility}"')
        return "\n".join(lines) + "\n"
