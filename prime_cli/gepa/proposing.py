"""One proposal of the search, run: the parent on its rows, the reflection (or the edit step's, or a merge
without a model call), the child on the same rows. It decides nothing (the engine's commit does).

What the reflection reads: the parent's rollouts on the plan's rows (the fresh minibatch; in plans saved
before issue 57 also the known rows) and on its lowest-scoring train rows scored before (`Plan.shown`,
planner.py, shown_rows.py), all from the cache once run.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from prime_cli.clients.errors import FatalEndpointError
from prime_cli.envs.errors import ModelError, OverlongPromptError
from prime_cli.envs.messages import content_text
from prime_cli.envs.types import ChatResponse

from .config import GepaConfig
from .context_window import ContextWindow
from .cost import metered
from .evaluator import Evaluator
from .fitting import Fitted, fitted_edit, fitted_reflection, need_order, no_fit_reason
from .instructions import instructions_with_evidence, merged_prompt
from .proposal import ProposalResult
from .reflection import Proposal, parse_reply
from .scored import RowScore, errored, row_score
from .state import Candidate, Plan

if TYPE_CHECKING:
    from prime_cli.clients.pool import ClientPool

    from .display import GepaDisplay

EVIDENCE_ROWS_PER_INSTRUCTION, MAX_EVIDENCE_ROWS = 2, 6
logger = logging.getLogger("prime_cli.gepa")
REFITS = 3
"""Reflections sent again, shorter, after the server refused one as too long for its context."""


class ReflectionAborted(Exception):
    """The reflection model failed for good (endpoint unusable, or too many failures in a row)."""


MadeAhead = Callable[[str], "Awaitable[ChatResponse] | None"]
"""The reply to a reflection prompt whose call a prefetch made ahead (taken: asked for once), or None."""


def nothing_ahead(_text: str) -> None:
    return None


class Proposer:
    """Runs proposals over the committed `candidates` (the search state's own list, read as it grows)."""

    def __init__(self, config: GepaConfig, evaluator: Evaluator, reflector: ClientPool, candidates: list[Candidate],
                 prompt_of: Callable[[int], str], window: ContextWindow, metric_names: list[str],
                 display: GepaDisplay | None) -> None:
        self.config, self.evaluator, self.reflector = config, evaluator, reflector
        self.candidates, self._prompt = candidates, prompt_of
        self.window, self.metric_names, self.display = window, metric_names, display

    async def propose(self, plan: Plan, made_ahead: MadeAhead = nothing_ahead) -> ProposalResult:
        parent_prompt, rows = self._prompt(plan.parent), plan.rows
        entries = await self.evaluator.row_results(parent_prompt, "train", rows)
        parent_scores = [row_score(row) for row in entries]
        result = ProposalResult(plan, parent_scores, self.evaluator.keys(parent_prompt, "train", rows),
                                parent_errored=errored(entries))
        perfect = self.config.perfect_score
        if perfect is not None and all(s is not None and s >= perfect for s in parent_scores):
            result.reason = "minibatch already perfect"
            return result
        if plan.kind == "merge":
            proposal = Proposal(merged_prompt(self.candidates, plan.parent, plan.other or 0), "merged")
        else:
            proposal = await self._fitted_reflect(plan, parent_prompt, entries, made_ahead)
        result.reflected = plan.kind != "merge"
        result.reflection_reply, result.reflection_truncated = proposal.raw, proposal.truncated
        if proposal.prompt is None:
            result.reason = proposal.reason
            result.reflection_failed = proposal.reason.startswith("reflection failed")
            return result
        result.child_prompt = proposal.prompt
        if proposal.prompt == parent_prompt:
            result.reason = "reflection returned the parent prompt unchanged"
            return result
        # only candidates every run has committed by now (the plan came after the commit of iteration - P),
        # so that a resumed or a differently timed run skips the same children; the commit finds the others
        committed = plan.iteration - self.config.parallel_proposals
        duplicate = next((c.idx for c in self.candidates if committed >= 1 and c.iteration <= committed
                          and c.prompt == proposal.prompt), None)
        if duplicate is not None:  # its rollouts would buy nothing
            result.reason = f"same prompt as candidate {duplicate}"
            return result
        result.child_scores = await self.evaluator.scores(proposal.prompt, "train", rows)
        result.child_errored = self.evaluator.errored(proposal.prompt, "train", rows)
        result.keys += self.evaluator.keys(proposal.prompt, "train", rows)
        return result

    def train_scores(self, prompt: str, rows: list[int]) -> list[RowScore]:
        """A prompt's scores on train rows whose rollouts are all in the cache (None for another row)."""
        cache = self.evaluator.cache
        row_keys = [self.evaluator.keys(prompt, "train", [row]) for row in rows]
        return [row_score([cache.get(k) for k in keys]) if all(k in cache for k in keys) else None for keys in row_keys]

    def reflection_text(self, plan: Plan, parent_prompt: str, entries: list[list[dict[str, Any]]]) -> str | None:
        """What the reflection reads: the parent on the plan's rows, then on its lowest-scoring rows scored before,
        shortened to fit the reflection model's context (fitting.py; None: even the shortest does not)."""
        return self._fitted_text(plan, parent_prompt, entries).text

    def _fitted_text(self, plan: Plan, parent_prompt: str, entries: list[list[dict[str, Any]]]) -> Fitted:
        cache = self.evaluator.cache
        records = [e["record"] for row in entries for e in row]
        records += [cache.get(k)["record"] for k in self.evaluator.keys(parent_prompt, "train", plan.shown) if k in cache]
        order = need_order(len(entries), self.evaluator.r, len(plan.minibatch), len(records))
        essential = min(len(plan.minibatch), len(entries))
        if plan.kind == "edit":
            return self._edit_text(plan.parent, records, order, essential)
        return fitted_reflection(parent_prompt, records, self.metric_names, order, essential, self.window)

    def _edit_text(self, idx: int, train_records: list[dict[str, Any]], order: list[int], essential: int) -> Fitted:
        """The edit step's reflection prompt: candidate idx's instructions with the validation rows each made
        worse (its own records on them, from the cache), and its train records."""
        candidate, cache = self.candidates[idx], self.evaluator.cache
        instructions = instructions_with_evidence(self.candidates, idx)
        val_records: dict[int, dict[str, Any]] = {}
        for item in reversed(instructions):  # the newest first: the likeliest to be wrong, and least tested
            for row in item.worse_rows[:EVIDENCE_ROWS_PER_INSTRUCTION]:
                keys = self.evaluator.keys(candidate.prompt, "val", [row])
                if len(val_records) < MAX_EVIDENCE_ROWS and all(k in cache for k in keys):
                    worst = min((cache.get(k) for k in keys), key=lambda e: e.get("reward") is not None and e["reward"])
                    val_records[row] = worst["record"]  # its failing rollout (with -r > 1 another may pass)
        return fitted_edit(candidate.prompt, instructions, dict(sorted(val_records.items())), train_records,
                           self.metric_names, order, essential, self.window)

    async def call_reflection(self, text: str) -> ChatResponse:
        client, model = self.reflector.for_group(0)
        return await metered(self.evaluator.meter, client.chat([{"role": "user", "content": text}], model=model,
                                                               sampling_args=self.config.reflection_request_args()))

    async def _fitted_reflect(self, plan: Plan, parent_prompt: str, entries: list[list[dict[str, Any]]],
                              made_ahead: MadeAhead) -> Proposal:
        """The reflection on a prompt that fits the reflection model's context; refused as too long all the
        same (a context it did not report, a denser tokenizer), it is shortened by what the refusal says
        and sent again."""
        for attempt in range(REFITS + 1):
            fitted = self._fitted_text(plan, parent_prompt, entries)
            if fitted.text is None:
                return Proposal(None, no_fit_reason(fitted, self.window))
            if fitted.step.chars is not None:
                self._say_shortened(fitted)
            try:
                return await self._reflect(fitted.text, made_ahead)
            except OverlongPromptError as exc:
                if attempt == REFITS or not self.window.learn(fitted.text, str(exc)):
                    return Proposal(None, f"reflection failed: {exc}")
        raise AssertionError("unreachable")

    def _say_shortened(self, fitted: Fitted) -> None:
        """Once a run: reflection prompts are shortened (the log has each shortening)."""
        window = self.window
        logger.info("reflection prompt shortened to fit %s beside max_tokens %d: %d examples, fields cut to %s "
                    "characters, %d tokens", window.described(), window.max_tokens, fitted.step.shown,
                    fitted.step.chars, fitted.tokens)
        if window.shortened_said:
            return
        window.shortened_said = True
        if self.display is not None:
            self.display.message(f"reflection prompts are shortened to fit the reflection model: {window.described()}, "
                                 f"{window.max_tokens} of them for its reply (fewer examples, long fields cut; "
                                 "gepa.log has each)", "info")

    async def _reflect(self, text: str, made_ahead: MadeAhead) -> Proposal:
        """The reflection's reply to `text`; OverlongPromptError (the prompt did not fit) is raised."""
        ahead = made_ahead(text)  # the same call, made ahead by a prefetch
        try:
            response = await (ahead if ahead is not None else self.call_reflection(text))
        except FatalEndpointError as exc:
            raise ReflectionAborted(f"reflection model {self.config.reflector}: {exc}") from None
        except OverlongPromptError:
            raise
        except ModelError as exc:
            return Proposal(None, f"reflection failed: {exc}")
        return parse_reply(content_text(response.message), response.finish_reason)

