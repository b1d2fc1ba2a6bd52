"""How many tokens the reflection model takes, and how many a text is in them (counted conservatively).

The context is looked up once, before the seed is scored, in this order: the endpoint registry's
`context_length`; the server's /v1/models (vLLM reports `max_model_len`, and in `root` the folder it
serves, whose tokenizer.json then counts exactly); LiteLLM's model table (`max_input_tokens`, for API
models). Unknown, nothing is shortened up front, and a refusal that names the limit (vLLM's "maximum
context length is N tokens ... at least M input tokens") teaches it (`learn`): the reflection is then
shortened and sent again. Without a tokenizer a token is taken as 3 UTF-8 bytes (tokenizers average
about 4 on prose); a tokenizer's count gets 3% more; both add the chat template's tokens.
"""

from __future__ import annotations

import json
import logging
import math
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger("prime_cli.gepa")

TEMPLATE_TOKENS = 64  # the chat template around one user message: roles, special tokens, a default system prompt
BYTES_PER_TOKEN = 3.0
TOKENIZER_MARGIN = 1.03
QUERY_TIMEOUT = 5.0
_LIMIT = re.compile(r"maximum context length is (\d+)", re.IGNORECASE)
_COUNT = re.compile(r"(?:contains (?:at least )?|has |\()(\d+) (?:input tokens|tokens|in the messages)", re.IGNORECASE)


@dataclass
class ContextWindow:
    """The reflection model's context (`context` tokens, prompt + completion; None: unknown) and the
    reply's `max_tokens`, which must fit beside the prompt."""

    model: str
    context: int | None
    max_tokens: int
    source: str = ""  # where the context comes from, for the lines that quote it
    tokenizer: Any = field(default=None, repr=False)  # a `tokenizers.Tokenizer`, or None: a bytes bound
    scale: float = 1.0  # raised when a refusal shows the count was too low
    shortened_said: bool = False

    def tokens(self, text: str) -> int:
        """`text` sent as one user message, in tokens: never fewer than the server counts (as far as known)."""
        if self.tokenizer is not None:
            raw = len(self.tokenizer.encode(text, add_special_tokens=False).ids) * TOKENIZER_MARGIN
        else:
            raw = len(text.encode("utf-8")) / BYTES_PER_TOKEN
        return math.ceil(raw * self.scale) + TEMPLATE_TOKENS

    @property
    def room(self) -> int | None:
        """Tokens a prompt may take (None: unknown, anything is sent)."""
        return None if self.context is None else self.context - self.max_tokens

    def fits(self, text: str) -> bool:
        room = self.room
        return room is None or self.tokens(text) <= room

    def described(self) -> str:
        """`SmolLM2 takes 4096 tokens (its server's max_model_len)`."""
        return f"{self.model} takes {self.context} tokens" + (f" ({self.source})" if self.source else "")

    def log(self) -> None:
        logger.info("reflection model %s: context %s (%s), reply max_tokens %d, tokens counted %s", self.model,
                    self.context, self.source or "unknown", self.max_tokens,
                    "with its tokenizer" if self.tokenizer is not None else "as 3 bytes each")

    def learn(self, text: str, message: str) -> bool:
        """A refusal of `text` as too long (the server's `message`): take the limit and the count it names.
        True when a shorter fit is worth sending (the window now knows more); False when it cannot tell."""
        limit = _LIMIT.search(message)
        count = _COUNT.search(message)
        learned = False
        if limit and (self.context is None or int(limit.group(1)) < self.context):
            self.context, self.source, learned = int(limit.group(1)), "the limit its server named", True
        estimate = self.tokens(text)
        counted = int(count.group(1)) if count else None
        if counted is not None and counted >= estimate - TEMPLATE_TOKENS // 2:
            # counted more than we did (or "at least" as many): count denser from now on
            self.scale *= max(1.25, 1.1 * (counted + TEMPLATE_TOKENS) / estimate)
            learned = True
        elif not learned and self.context is not None:
            self.scale *= 1.5  # refused without numbers, although it seemed to fit: count denser
            learned = True
        logger.info("the reflection model refused a prompt as too long (%s); context %s, count scale %.2f",
                    message, self.context, self.scale)
        return learned


def model_card(url: str, model: str, headers: dict[str, str]) -> dict[str, Any] | None:
    """The entry of `model` in GET {url}/models, or None (no answer, or not listed)."""
    request = urllib.request.Request(f"{url.rstrip('/')}/models", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=QUERY_TIMEOUT) as response:  # noqa: S310 - the user's server
            data = json.loads(response.read())
    except (OSError, urllib.error.URLError, ValueError):
        return None
    cards = data.get("data") if isinstance(data, dict) else None
    return next((c for c in cards or [] if isinstance(c, dict) and c.get("id") == model), None)


def load_tokenizer(root: Any) -> Any:
    """The tokenizer in a local model folder (tokenizer.json, read with `tokenizers`), or None."""
    if not isinstance(root, str) or not root:
        return None
    path = Path(root) / "tokenizer.json"
    try:
        if not path.is_file():
            return None
        from tokenizers import Tokenizer  # lazy: optional dependency

        return Tokenizer.from_file(str(path))
    except Exception:  # noqa: BLE001 - no tokenizer (or an unreadable one): the bytes bound counts
        logger.info("no usable tokenizer at %s; counting 3 bytes a token", path)
        return None


def table_context(model: str) -> int | None:
    """`max_input_tokens` of `model` (or of the name after its provider prefix) in LiteLLM's model table."""
    from prime_cli.clients.model_names import model_table  # lazy: start-up

    table = model_table()
    for name in (model, model.split("/", 1)[-1]):
        value = (table.get(name) or {}).get("max_input_tokens")
        if isinstance(value, int) and value > 0:
            return value
    return None


def spec_headers(spec: Any) -> dict[str, str]:
    from prime_cli.clients.errors import ClientConfigError  # lazy: start-up
    from prime_cli.clients.registry import api_key_for  # lazy: start-up

    headers = dict(spec.headers or {})
    try:
        headers.setdefault("Authorization", f"Bearer {api_key_for(spec)}")
    except ClientConfigError:
        pass  # the run's own check names a missing key
    return headers


def reflection_window(specs: list[Any], model: str, max_tokens: int) -> ContextWindow:
    """The context of the reflection model (its first endpoint: replicas serve one model)."""
    window = ContextWindow(model, None, max_tokens)
    spec = specs[0] if specs else None
    if spec is None:
        return window
    if spec.context_length:
        window.context, window.source = spec.context_length, "its context_length in the endpoint registry"
    if spec.kind == "openai" and spec.url:
        card = model_card(spec.url, spec.model, spec_headers(spec)) or {}
        length = card.get("max_model_len")
        if window.context is None and isinstance(length, int) and length > 0:
            window.context, window.source = length, "its server's max_model_len"
        window.tokenizer = load_tokenizer(card.get("root"))
    if window.context is None and (length := table_context(spec.model)) is not None:
        window.context, window.source = length, "LiteLLM's model table"
    return window
