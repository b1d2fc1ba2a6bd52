"""From an EvalConfig to a pool of model clients (and the secrets to keep out of logs), through
prime_cli.clients.endpoints, which the GEPA engine uses too."""

from __future__ import annotations

from typing import Any

from prime_cli.clients import endpoints

from .config import EvalConfig


def endpoint_specs(config: EvalConfig) -> list[Any]:
    return endpoints.endpoint_specs(config.model, config.base_url, config.api_key_var, config.endpoints_path,
                                    config.headers)


def open_pool(config: EvalConfig, specs: list[Any]) -> Any:
    return endpoints.open_pool(specs, max_concurrent=config.max_concurrent, max_retries=config.max_retries,
                               timeout=config.timeout, on_retry=RetryWarnings(config.timeout))


class RetryWarnings:
    """One `warning:` line on stderr (above a live panel) per retried model call, as it happens: every
    timeout (a call that may have cost minutes, started again from scratch), and the first `shown` retries
    of other kinds (a rate-limited run would print hundreds); the summary counts them all. A server that
    cannot be reached (connection refused) gets none: if it stays so, the run ends with that one error line."""

    def __init__(self, timeout: float, shown: int = 5, stream: Any = None) -> None:
        self.timeout, self.shown, self.stream = timeout, shown, stream
        self.others = 0

    def __call__(self, describe: str, reason: str, attempt: int, max_retries: int) -> None:
        if reason == "timeout":
            line = (f"{describe} sent no reply within {self.timeout:g}s (--timeout); the server may still be "
                    f"generating it: retry {attempt}/{max_retries} starts the request again from scratch "
                    "(-t N caps the reply length)")
        elif not (reason.startswith("HTTP ") or reason in ("dropped connection", "malformed response")):
            return  # unreachable (retry.py's reasons for a connection that could not be opened)
        else:
            self.others += 1
            if self.others > self.shown:
                return
            line = f"{describe}: {reason}, retry {attempt}/{max_retries}"
            if self.others == self.shown:
                line += " (further retries other than timeouts are not shown; the summary counts them)"
        import sys  # lazy: already loaded

        from prime_cli.runs.visible import visible  # lazy: start-up

        print(f"warning: {visible(line)}", file=self.stream or sys.stderr, flush=True)


secrets_of = endpoints.secrets_of


def check_endpoints(config: EvalConfig, role: str = "") -> list[str]:
    """Resolve -m/-b/-k/-e/--header and check that every key variable is set, sending no request; returns
    the lines to show about where the model goes."""
    return endpoints.check_endpoints(config.model, config.base_url, config.api_key_var, config.endpoints_path,
                              config.headers, role=role)
