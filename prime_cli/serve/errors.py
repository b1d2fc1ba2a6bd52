"""Errors the user can act on (the CLI prints one line and exits 2)."""


class ServeError(Exception):
    """A model or server problem with a clear fix: bad model folder, port in use, vLLM failed."""


class ServerDied(ServeError):
    """A server that was serving stopped on its own (exit code 1, not a usage error)."""
