"""A chat transcript: one block per message, tool calls and tool results shown as such, with search."""

from __future__ import annotations

import re
from typing import Any

from rich.text import Text
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from prime_cli.runs.visible import json_visible, visible
from prime_cli.tui.text import content_text, messages_of, tool_call_parts


class MessageBlock(Static):
    """One message. Keeps its plain text so search can highlight it again."""

    def __init__(self, message: dict[str, Any], label: str = "") -> None:
        self.message = message
        role = str(message.get("role") or "?")
        self.plain = visible(self._plain(message), multiline=True)  # what is shown and searched
        super().__init__(classes=f"message role-{role if role in ('system', 'user', 'assistant', 'tool') else 'other'}")
        title = label or role
        if role == "tool":
            title = f"tool result{' · ' + str(message['name']) if message.get('name') else ''}" \
                    f"{' · ' + str(message['tool_call_id']) if message.get('tool_call_id') else ''}"
        self.border_title = Content(visible(title))  # plain text: a tool's name is not markup
        self.update(self.render_text(None))

    @staticmethod
    def _plain(message: dict[str, Any]) -> str:
        text = content_text(message.get("content"))
        calls = message.get("tool_calls") or []
        lines = [text] if text or not calls else []
        for call in calls:
            call_id, name, args = tool_call_parts(call)
            lines.append(f"→ tool call {name}{' [' + call_id + ']' if call_id else ''}\n{json_visible(args)}")
        return "\n".join(lines) if lines else "(empty)"

    def render_text(self, pattern: re.Pattern[str] | None) -> Text:
        text = Text(self.plain)
        text.highlight_regex(r"^→ tool call .*$", "bold magenta")
        if pattern is not None:
            text.highlight_regex(pattern, "black on yellow")
        return text

    def matches(self, pattern: re.Pattern[str]) -> int:
        return len(pattern.findall(self.plain))


class Transcript(VerticalScroll):
    """Prompt then completion, one MessageBlock each; `show` swaps in another rollout."""

    def __init__(self, prompt: Any = None, completion: Any = None, *, id: str | None = None,
                 show_prompt: bool = True) -> None:
        super().__init__(id=id, classes="transcript")
        self.show_prompt = show_prompt
        self._content = (prompt, completion)
        self.blocks: list[MessageBlock] = []
        self._hits: list[MessageBlock] = []
        self._hit = -1
        self._pattern: re.Pattern[str] | None = None

    def on_mount(self) -> None:
        self.show(*self._content)

    def show(self, prompt: Any, completion: Any) -> None:
        self._content = (prompt, completion)
        prompt_messages = messages_of(prompt) if self.show_prompt else []
        completion_messages = messages_of(completion)
        widgets: list[Static] = []
        self.blocks = [MessageBlock(m) for m in prompt_messages]
        widgets.extend(self.blocks)
        if prompt_messages:
            widgets.append(Static("── completion ──", classes="divider"))
        if not completion_messages:
            widgets.append(Static("(no completion)", classes="empty"))
        completion_blocks = [MessageBlock(m) for m in completion_messages]
        self.blocks += completion_blocks
        widgets.extend(completion_blocks)
        self._hits, self._hit = [], -1
        self.remove_children()
        self.mount_all(widgets)
        self.scroll_home(animate=False)

    def search(self, query: str) -> int:
        """Highlight `query` (a regex, case-insensitive; plain text if it is not one) and scroll
        to the first block holding it. Returns the number of matches."""
        try:
            pattern = re.compile(query, re.I) if query else None
        except re.error:
            pattern = re.compile(re.escape(query), re.I)
        self._pattern = pattern
        total = 0
        self._hits = []
        for block in self.blocks:
            block.update(block.render_text(pattern))
            if pattern is not None and block.matches(pattern):
                total += block.matches(pattern)
                self._hits.append(block)
        self._hit = -1
        self.next_hit()
        return total

    def next_hit(self, step: int = 1) -> MessageBlock | None:
        if not self._hits:
            return None
        self._hit = (self._hit + step) % len(self._hits)
        block = self._hits[self._hit]
        self.scroll_to_widget(block, animate=False, top=True)
        return block
