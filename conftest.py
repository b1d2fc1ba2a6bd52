"""What every test process shares, for both test trees (tests/ and plugins/prime-lora/tests/).

A suite started in the background of a non-interactive shell (`make test &`, nohup, some CI runners)
inherits SIGINT ignored, and every `prime` it starts would ignore the Ctrl-C the tests send (an
ignored signal stays ignored across exec; a caught one is reset to the default). Catching it here
gives each child the default disposition, as in a terminal.

Where PYTHONDONTWRITEBYTECODE is set (as in some sandboxes; pip installs with --no-compile), every
`prime train`, `prime serve` and `prime eval run` the suite starts would compile torch, transformers
and vLLM from source again (10-30 s a process on 2 cores). The session's processes share one
bytecode cache instead, in a temporary folder (PYTHONPYCACHEPREFIX): nothing is written beside the
sources, and the cache goes with the session.
"""

import os
import shutil
import signal
import sys
import tempfile

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

_PYCACHE = None
if sys.dont_write_bytecode and sys.pycache_prefix is None:
    _PYCACHE = tempfile.mkdtemp(prefix="prime-tests-pycache-")
    sys.pycache_prefix, sys.dont_write_bytecode = _PYCACHE, False  # this process fills it too
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = _PYCACHE


def pytest_unconfigure(config):
    if _PYCACHE is not None:
        shutil.rmtree(_PYCACHE, ignore_errors=True)
