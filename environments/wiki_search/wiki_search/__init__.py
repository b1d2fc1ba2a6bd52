"""wiki-search: answer multi-hop questions by searching and reading a local Wikipedia corpus.

A ToolEnv with three tools over a SQLite FTS5 index (corpus.py): `search_pages(query)`,
`view_sections(page_id)` and `read_section(section_id)`. Questions and pages come from one
HotpotQA-format file. The model ends with its answer inside <answer> tags. The reward is a judge
model's verdict when `judge_model` is set (JudgeRubric), else HotpotQA's token F1 against the
reference (exact match is recorded as a metric either way).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import prime_cli.envs as vf

from .corpus import WikiIndex, read_hotpotqa
from .scoring import exact_match, token_f1

SAMPLE_FILE = "dev_distractor_sample.jsonl"
SYSTEM_PROMPT = (
    "Answer the question using the Wikipedia tools: search_pages finds pages by keywords, "
    "view_sections lists a page's sections, read_section reads one. Questions may need facts from "
    "two pages. When you know the answer, reply without a tool call and give a short answer (a name, "
    "a date, yes or no...) inside <answer></answer> tags."
)

__all__ = ["WikiIndex", "build_tools", "load_environment", "read_hotpotqa", "resolve_corpus_path"]


def resolve_corpus_path(corpus_path: str | None) -> Path:
    if corpus_path:
        return Path(corpus_path).expanduser()
    root = os.environ.get("PRIME_DATA_DIR")
    if root:
        for candidate in (Path(root) / "hotpotqa" / SAMPLE_FILE, Path(root) / SAMPLE_FILE):
            if candidate.is_file():
                return candidate
    raise vf.EnvConfigError(
        "wiki-search has no corpus: pass -a '{\"corpus_path\": \"/path/to/hotpotqa.jsonl\"}' (a HotpotQA-format "
        f"file) or set PRIME_DATA_DIR to a folder holding hotpotqa/{SAMPLE_FILE}"
    )


def build_tools(index: WikiIndex, max_results: int = 5) -> list:
    async def search_pages(query: str) -> str:
        """Search the Wikipedia pages by keywords; returns the best pages' ids, titles and a snippet.

        Args:
            query: keywords, e.g. a name or a title.
        """
        hits = index.search(query, max_results)
        if not hits:
            return f"no page matches {query!r}; try other keywords"
        return "\n".join(f"{page.page_id} | {page.title} | {snippet}" for page, snippet in hits)

    async def view_sections(page_id: str) -> str:
        """List the sections of a page (their ids and first words).

        Args:
            page_id: a page id returned by search_pages.
        """
        page = index.page(page_id)
        lines = [f"{page.title} ({len(page.sections)} sections)"]
        lines += [f"{page.page_id}#{i} | {' '.join(text.split()[:10])}..." for i, text in enumerate(page.sections, start=1)]
        return "\n".join(lines)

    async def read_section(section_id: str) -> str:
        """Read one section of a page.

        Args:
            section_id: a section id from view_sections, like 'page_id#1'.
        """
        page, number, text = index.section(section_id)
        return f"{page.title}, section {number} of {len(page.sections)}:\n{text}"

    return [search_pages, view_sections, read_section]


def judge_client_for(judge_model: str, judge_base_url: str | None, judge_api_key_var: str | None) -> Any:
    """A prime model client for the judge: an endpoint id from configs/endpoints.toml, a model id with
    judge_base_url, or a name LiteLLM knows (gpt-4.1-mini, anthropic/...), its key checked before any rollout."""
    import sys

    from prime_cli.clients.endpoints import check_endpoints
    from prime_cli.clients.pool import make_client
    from prime_cli.clients.registry import resolve_model

    for line in check_endpoints(judge_model, judge_base_url, judge_api_key_var, role="judge model",
                                key_flag="judge_api_key_var = NAME"):
        print(f"judge {line}", file=sys.stderr, flush=True)
    spec = resolve_model(judge_model, base_url=judge_base_url, key_var=judge_api_key_var)[0]
    return make_client(spec, max_concurrent=16), spec.model


def load_environment(
    corpus_path: str | None = None,
    num_train_examples: int = -1,
    num_eval_examples: int = -1,
    system_prompt: str = SYSTEM_PROMPT,
    max_turns: int = 10,
    max_results: int = 5,
    sentences_per_section: int = 2,
    judge_model: str | None = None,
    judge_base_url: str | None = None,
    judge_api_key_var: str | None = None,
) -> vf.Environment:
    """Wiki-search environment.

    Args:
        corpus_path: HotpotQA-format file (default: $PRIME_DATA_DIR/hotpotqa/dev_distractor_sample.jsonl).
        num_train_examples / num_eval_examples: questions kept (-1: all; both splits use the file's questions).
        system_prompt: the instruction given to the model (GEPA optimises it).
        max_turns: model calls per rollout.
        max_results: pages returned by one search.
        sentences_per_section: sentences grouped into one readable section.
        judge_model: an endpoint id or model id; when set, a judge model decides correctness.
        judge_base_url / judge_api_key_var: the judge's server and the NAME of its key variable.
    """
    if sentences_per_section < 1 or max_results < 1:
        raise vf.EnvConfigError("sentences_per_section and max_results must be at least 1")
    pages, rows = read_hotpotqa(resolve_corpus_path(corpus_path), sentences_per_section)
    index = WikiIndex(pages)
    parser = vf.XMLParser(["answer"], answer_field="answer")

    def answer_f1(completion, answer, parser) -> float:
        """HotpotQA token F1 of the <answer> against the reference."""
        return token_f1(parser.parse_answer(completion) or "", answer)

    def answer_exact_match(completion, answer, parser) -> float:
        """1.0 when the normalised <answer> equals the normalised reference."""
        return exact_match(parser.parse_answer(completion) or "", answer)

    if judge_model:
        client, model = judge_client_for(judge_model, judge_base_url, judge_api_key_var)

        async def judge_correct(judge, prompt, completion, answer, state) -> float:
            """1.0 when the judge model says the answer matches the reference."""
            verdict = await judge(prompt, completion, answer, state)
            return 1.0 if verdict.strip().lower().startswith("yes") else 0.0

        rubric: vf.Rubric = vf.JudgeRubric(judge_client=client, judge_model=model, parser=parser,
                                           judge_sampling_args={"temperature": 0.0, "max_tokens": 8})
        rubric.add_reward_func(judge_correct)
        rubric.add_metric(answer_f1)
    else:
        rubric = vf.Rubric(funcs=[answer_f1], parser=parser)
    rubric.add_metric(answer_exact_match)

    def take(limit: int) -> list[dict[str, Any]]:
        return rows if limit < 0 else rows[:limit]

    return vf.ToolEnv(
        tools=build_tools(index, max_results),
        dataset=take(num_train_examples),
        eval_dataset=take(num_eval_examples),
        system_prompt=system_prompt,
        parser=parser,
        rubric=rubric,
        max_turns=max_turns,
    )
