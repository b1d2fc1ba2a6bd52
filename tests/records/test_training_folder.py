"""The lock of a training run's folder (prime_cli/records/training_folder.py)."""

from __future__ import annotations

import errno
import fcntl
import os

import pytest

from prime_cli.records import training_folder
from prime_cli.records.training_folder import FolderLock, lock_holder
from prime_cli.runs.layouts import TrainingRunLayout


def test_a_release_whose_unlock_fails_still_closes_the_file_and_frees_the_folder(tmp_path, monkeypatch):
    layout = TrainingRunLayout(tmp_path / "run")
    lock = FolderLock.acquire(layout)
    fd, real_flock = lock.fd, fcntl.flock

    def flock(handle, operation):
        if operation == fcntl.LOCK_UN:
            raise OSError(errno.EIO, "I/O error")
        return real_flock(handle, operation)

    monkeypatch.setattr(training_folder.fcntl, "flock", flock)
    lock.release()
    assert lock.fd == -1
    with pytest.raises(OSError) as closed:
        os.fstat(fd)
    assert closed.value.errno == errno.EBADF
    assert lock_holder(layout) is None  # closing the file dropped the lock
    FolderLock.acquire(layout).release()
