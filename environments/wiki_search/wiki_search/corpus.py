"""The wiki-search corpus: HotpotQA records in, a SQLite FTS5 full-text index of their pages out.

A HotpotQA record (one JSON object per line, or the original JSON array) has `question`, `answer`
and `context`: a list of `[page_title, [sentence, ...]]`. Every page met in any record's context
joins the corpus once. A page's sentences are grouped into sections of a few sentences
(`<page_id>#<n>`), which the model can list and read one at a time. Search ranks pages by BM25
(FTS5's `bm25()`), with matches in the title counting more than matches in the text.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import prime_cli.envs as vf

FORMAT_HELP = (
    "expected HotpotQA format: one JSON object per line (or a JSON array) with `question`, `answer` "
    "and `context` = [[page_title, [sentence, ...]], ...]"
)
TITLE_WEIGHT, TEXT_WEIGHT = 4.0, 1.0
WORD = re.compile(r"\w+", re.UNICODE)


@dataclass
class Page:
    page_id: str
    title: str
    sentences: list[str]
    sections: list[str] = field(default_factory=list)  # each section's text


def slug(title: str) -> str:
    return "_".join(WORD.findall(title.lower())) or "page"


def _records(path: Path) -> list[tuple[str, Any]]:
    """(location, record) pairs from a JSON Lines file or a JSON array file."""
    text = path.read_text(encoding="utf-8")
    try:
        if text.lstrip().startswith("["):
            return [(f"{path} record {i}", r) for i, r in enumerate(json.loads(text), start=1)]
        return [(f"{path}:{n}", json.loads(line)) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    except json.JSONDecodeError as exc:
        raise vf.DatasetError(f"{path} is not JSON ({exc.msg}, line {exc.lineno}); {FORMAT_HELP}") from None


def _check(where: str, record: Any) -> list[tuple[str, list[str]]]:
    if not isinstance(record, dict) or not {"question", "answer", "context"} <= set(record):
        keys = ", ".join(sorted(record)) if isinstance(record, dict) else type(record).__name__
        raise vf.DatasetError(f"{where} is not a HotpotQA record (it has: {keys}); {FORMAT_HELP}")
    context = record["context"]
    ok = isinstance(context, list) and all(
        isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str)
        and isinstance(item[1], list) and all(isinstance(s, str) for s in item[1])
        for item in context
    )
    if not ok:
        raise vf.DatasetError(f"{where}: `context` is not a list of [title, [sentence, ...]]; {FORMAT_HELP}")
    return [(title, list(sentences)) for title, sentences in context]


def read_hotpotqa(path: str | Path, sentences_per_section: int = 2) -> tuple[list[Page], list[dict[str, Any]]]:
    """The corpus pages and the question rows of a HotpotQA file."""
    path = Path(path)
    if not path.is_file():
        raise vf.EnvConfigError(f"wiki-search: corpus file {path} does not exist")
    pages: dict[str, Page] = {}
    ids: set[str] = set()
    rows = []
    for where, record in _records(path):
        for title, sentences in _check(where, record):
            if title not in pages:
                page_id, n = slug(title), 2
                while page_id in ids:
                    page_id, n = f"{slug(title)}_{n}", n + 1
                ids.add(page_id)
                pages[title] = Page(page_id, title, sentences, group(sentences, sentences_per_section))
        supporting = sorted({fact[0] for fact in record.get("supporting_facts") or [] if fact})
        info = {"id": record.get("_id"), "type": record.get("type"), "level": record.get("level"),
                "supporting_pages": [pages[t].page_id for t in supporting if t in pages]}
        rows.append({"question": record["question"], "answer": str(record["answer"]), "info": info})
    if not rows:
        raise vf.DatasetError(f"{path} has no records; {FORMAT_HELP}")
    return list(pages.values()), rows


def group(sentences: list[str], size: int) -> list[str]:
    chunks = [" ".join(s.strip() for s in sentences[i:i + size]).strip() for i in range(0, len(sentences), size)]
    return [c for c in chunks if c] or [""]


def fts_query(text: str) -> str:
    """Free text as an FTS5 query: every word quoted (no operator injection), any word may match."""
    return " OR ".join(f'"{w}"' for w in WORD.findall(text.lower()))


class WikiIndex:
    """Pages in an in-memory SQLite database with an FTS5 index over titles and text."""

    def __init__(self, pages: list[Page]) -> None:
        self.pages = {p.page_id: p for p in pages}
        self.db = sqlite3.connect(":memory:", check_same_thread=False)
        try:
            self.db.execute("CREATE VIRTUAL TABLE pages USING fts5(page_id UNINDEXED, title, body)")
        except sqlite3.OperationalError as exc:
            raise vf.EnvConfigError(f"wiki-search needs SQLite with FTS5, which this Python lacks ({exc})") from None
        self.db.executemany("INSERT INTO pages VALUES (?, ?, ?)",
                            [(p.page_id, p.title, " ".join(p.sentences)) for p in pages])
        self.db.commit()

    def search(self, query: str, limit: int = 5) -> list[tuple[Page, str]]:
        """The best `limit` pages for `query` with a snippet of the matching text, best first."""
        match = fts_query(query)
        if not match:
            return []
        rows = self.db.execute(
            "SELECT page_id, snippet(pages, 2, '', '', ' ... ', 16) FROM pages WHERE pages MATCH ? "
            f"ORDER BY bm25(pages, 0.0, {TITLE_WEIGHT}, {TEXT_WEIGHT}) LIMIT ?",
            (match, limit),
        ).fetchall()
        return [(self.pages[page_id], snippet) for page_id, snippet in rows]

    def page(self, page_id: str) -> Page:
        page = self.pages.get(page_id.strip())
        if page is None:
            raise vf.ToolCallError(f"no page {page_id!r}; use a page_id returned by search_pages")
        return page

    def section(self, section_id: str) -> tuple[Page, int, str]:
        page_id, sep, number = section_id.strip().rpartition("#")
        if not sep or not number.isdigit():
            raise vf.ToolCallError(f"{section_id!r} is not a section id; they look like 'page_id#1' (see view_sections)")
        page = self.page(page_id)
        index = int(number)
        if not 1 <= index <= len(page.sections):
            raise vf.ToolCallError(f"{page.page_id} has sections 1 to {len(page.sections)}, not {index}")
        return page, index, page.sections[index - 1]
