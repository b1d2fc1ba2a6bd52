"""A verifiers v1 taskset as a prime environment: prime's own agent loop is the `null` harness.

`TasksetEnvironment(taskset)` gives eval, GEPA and the trainer what every prime environment gives: rows (one
per task: the task's system prompt and prompt as chat messages; `info` carries the task's `key`, `hash` and
index) and a rollout. A rollout is prime's turn loop (multiturn_env.py): the model replies; a reply with
tool calls gets the tools' results (the toolsets' `@vf.tool` methods, called in process: toolset.py) and
the model goes on; a reply without tool calls ends the rollout, as verifiers' `null` harness does. The
task's `@vf.stop` methods are asked after every reply, and `max_turns` caps the turns. Scoring runs the
task's `@vf.metric` and `@vf.reward` methods on the rollout's `Trace`; the reward is their weighted sum
(`TaskRubric`).

A system prompt set on the environment (GEPA's candidates) replaces every task's own, as `--system-prompt`
does in verifiers (`TasksetConfig.system_prompt`). An `INFINITE` taskset is read only as far as `-n` asks.
"""

from __future__ import annotations

import inspect
from functools import cache
from typing import Any

from ..decorators import stop
from ..errors import EnvConfigError, error_record
from ..multiturn_env import MultiTurnEnv, maybe_await
from ..rubrics import RolloutScore, Rubric
from ..types import State
from .decorators import call_with, marked
from .episodes import Agent, Agents, SingleAgentEnv
from .runtime import SandboxRuntime, spec_for, use_runtime
from .task import Task
from .taskset import Taskset
from .toolset import Toolset, call_tool, rollout_scope, tool_definitions
from .trace import Trace
from .types import ToolMessage, UserMessage, field_of

DEFAULT_MAX_TURNS = 50  # verifiers' null harness has no turn cap of its own; a loop of tool calls must end
TASK_KEY, TASK_HASH, TASK_IDX = "task_key", "task_hash", "task_idx"


class TaskRubric(Rubric):
    """Scores a rollout with its task's own `@vf.metric` and `@vf.reward` methods."""

    def __init__(self, rewards: dict[str, float], metric_names: list[str], prepare: Any) -> None:
        super().__init__()
        self.rewards, self.metric_names = rewards, metric_names
        self.prepare = prepare  # state -> None: gives a state read back from disk (a rescore) its task and trace

    def get_reward_func_names(self) -> list[str]:
        return [*self.rewards, *self.metric_names]

    def get_reward_weights(self) -> list[float]:
        return [*self.rewards.values(), *[0.0] * len(self.metric_names)]

    async def compute_scores(self, states: list[State]) -> list[RolloutScore]:
        return [await self._score(state) for state in states]

    async def _score(self, state: State) -> RolloutScore:
        if "v1_trace" not in state:
            self.prepare(state)
        trace: Trace = state["v1_trace"]
        trace.rewards.clear()
        trace.metrics.clear()
        errors: list[dict[str, Any]] = []  # a reward that raised: counted and shown as the rollout's error, never 0
        task: Task = state["v1_task"]
        runtime = state.get("v1_runtime") or (runtime_for(task) if needs_runtime(task) else None)
        try:
            await task.score(trace, runtime=runtime, errors=errors)
        finally:
            state.pop("v1_runtime", None)
            if runtime is not None:
                await runtime.close()
        metrics = {name: r.score for name, r in trace.rewards.items() if r is not None}
        metrics.update({name: v for name, v in trace.metrics.items() if v is not None})
        return RolloutScore(reward=trace.reward, metrics=metrics, errors=errors)


class TasksetEnvironment(MultiTurnEnv):
    def __init__(self, taskset: Taskset, max_turns: int = DEFAULT_MAX_TURNS, episode: SingleAgentEnv | None = None,
                 **kwargs: Any) -> None:
        self.taskset, self.episode = taskset, episode
        self.task_type = type(taskset).task_type()
        config = taskset.config
        self.toolsets: list[Toolset] = [*type(taskset).toolsets(config), *self.task_type.toolsets(config.task)]
        tools, self._tool_methods = tool_definitions(self.toolsets)
        self._tasks: list[Task] | None = None
        probe = self.task_type.__new__(self.task_type)
        if marked(probe, "intercept"):
            raise EnvConfigError(f"{self.task_type.__name__} has @vf.intercept methods (request or response rewrites "
                                 "in verifiers' interception proxy), which prime does not run")
        rubric = TaskRubric({f.__name__: getattr(f, "weight", 1.0) for f in marked(probe, "reward")},
                            [f.__name__ for f in marked(probe, "metric")], self._prepare)
        super().__init__(max_turns=max_turns, eval_dataset=self._task_rows, rubric=rubric, oai_tools=tools or None, **kwargs)

    # -- rows -----------------------------------------------------------------------------------

    @property
    def system_prompt(self) -> str | None:
        """The one set on the environment (GEPA's candidate), else the system prompt every task shares (GEPA's
        seed), else None (tasks with different ones, or an INFINITE taskset: each keeps its own)."""
        if self._system_prompt is not None or not hasattr(self, "taskset") or type(self.taskset).INFINITE:
            return self._system_prompt
        shared = {task.data.system_prompt for task in self.tasks()}
        return shared.pop() if len(shared) == 1 else None

    @system_prompt.setter
    def system_prompt(self, value: str | None) -> None:
        self._system_prompt = value
        self._rows = {}

    def tasks(self, limit: int | None = None) -> list[Task]:
        """The taskset's tasks (the first `limit` of an INFINITE one, which needs a limit)."""
        if type(self.taskset).INFINITE:
            if limit is None or limit < 0:
                raise EnvConfigError(f"{type(self.taskset).__name__} is infinite (it makes tasks forever): give "
                                     "the number of tasks to run with -n")
            if self._tasks is None or len(self._tasks) < limit:
                self._tasks = self.taskset.take(limit)
            return self._tasks[:limit]
        if self._tasks is None:
            self._tasks = list(self.taskset)
        return self._tasks if limit is None or limit < 0 else self._tasks[:limit]

    def _task_rows(self, limit: int | None = None) -> list[dict[str, Any]]:
        rows = []
        for position, task in enumerate(self.tasks(limit)):
            data = task.data
            if data.prompt is None and self.episode is None:
                raise EnvConfigError(f"task {data.idx} of {type(self.taskset).__name__} has no prompt and the package "
                                     "exports no environment whose run() opens the conversation")
            system = self._system_prompt if self._system_prompt is not None else data.system_prompt
            prompt = ([] if data.prompt is None else [UserMessage(data.prompt)] if isinstance(data.prompt, str)
                      else list(data.prompt))
            if system and not (prompt and _role(prompt[0]) == "system"):
                prompt.insert(0, {"role": "system", "content": system})
            answer = getattr(data, "answer", None)  # a reference reply for `prime env check`, when the row has one
            rows.append({"prompt": [dict(m) for m in prompt], "example_id": data.idx if data.idx is not None else position,
                         "answer": "" if answer is None else str(answer),
                         "info": {TASK_KEY: task.key, TASK_HASH: task.hash, TASK_IDX: position},
                         "task": type(self.taskset).__name__})
        return rows

    def _normalized(self, which: str) -> list[dict[str, Any]] | None:
        """The task rows, complete as built (a prompt-less task's row has no messages yet: its environment's
        run() opens the conversation)."""
        if which not in self._rows:
            self._rows[which] = self._task_rows() if which == "eval_dataset" else None
        return self._rows[which]

    def get_eval_dataset(self, n: int = -1, seed: int | None = None) -> list[dict[str, Any]]:
        if type(self.taskset).INFINITE and seed is None:  # read only as far as asked
            return self._task_rows(n)
        return super().get_eval_dataset(n, seed)

    def get_dataset(self, n: int = -1, seed: int | None = None) -> list[dict[str, Any]]:
        return self.get_eval_dataset(n, seed)

    def _task_of(self, row_info: dict[str, Any]) -> Task:
        task = self.tasks(row_info[TASK_IDX] + 1)[row_info[TASK_IDX]]
        if self._system_prompt is not None:
            task = task.with_system_prompt(self._system_prompt)
        return task

    # -- the rollout ----------------------------------------------------------------------------

    def _prepare(self, state: State) -> None:
        """The state's task and its Trace (from the messages so far: a rollout's start, or a saved rollout)."""
        task = self._task_of(state["info"])
        state["v1_task"] = task
        state["v1_trace"] = Trace(task, state["prompt"], task.state_type()())
        self.sync_trace(state)

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        rollout_scope()
        for toolset in self.toolsets:
            await toolset.ensure_setup()
        self._prepare(state)
        task = state["v1_task"]
        if needs_runtime(task):
            state["v1_runtime"] = runtime_for(task)  # closed once the rollout is scored (TaskRubric)
        use_runtime(state.get("v1_runtime"))  # for its tools (harbor.BashToolset)
        await _hook(task, "setup", state)
        if self.episode is not None:  # the environment's run() plays the whole exchange (episodes.py)
            state["v1_episode"] = True
            await self.episode.run(task, Agents(Agent(self, state, self._segment)))
            state["v1_episode_done"] = True
        return state

    async def exchange_over(self, state: State) -> bool:
        """A stop condition ends the exchange (in an episode a reply without tool calls only ends a segment)."""
        if await self._stop_condition_holds(state):
            state["v1_exchange_stop"] = state["stop_condition"]
            return True
        return False

    async def _segment(self, state: State) -> bool:
        """The model's part of one turn: reply, tools, reply ... until a reply without tool calls. True when a stop
        condition ended the exchange."""
        client = state["client"].inner
        while True:
            response = await self.get_model_response(client, state["model"], self._messages(state), state,
                                                     state["sampling_args"])
            state["turn"] += 1
            self._append(state, response.message)
            if await self.exchange_over(state):
                return True
            if not (field_of(response.message, "tool_calls") or []):
                return False
            self._append(state, await self.env_response(self._messages(state), state))

    @stop(priority=95)
    async def episode_ended(self, state: State) -> bool:
        """The environment's run() returned: its exchange is over."""
        return bool(state.get("v1_episode_done"))

    def sync_trace(self, state: State) -> Trace:
        trace: Trace = state["v1_trace"]
        trace.completion = list(state["completion"])
        trace.turns = state["turn"]
        trace.truncated = bool(state.get("is_truncated"))
        return trace

    @stop(priority=10)
    async def task_stop(self, state: State) -> bool:
        """One of the task's `@vf.stop` methods holds (its name is the rollout's stop condition)."""
        if state["turn"] == 0 or "v1_task" not in state:
            return False
        trace = self.sync_trace(state)
        for fn in marked(state["v1_task"], "stop"):
            if await maybe_await(call_with(fn, {"trace": trace, "task": trace.task.data})):
                trace.stop(fn.__name__)
                return True
        return False

    @stop(priority=-50)
    async def no_tool_calls(self, state: State) -> bool:
        """The model replied without calling a tool: its answer is in (verifiers' null harness ends here)."""
        last = state["completion"][-1] if state["turn"] and state["completion"] else None
        return not state.get("v1_episode") and last is not None and _role(last) == "assistant" and not (field_of(last, "tool_calls") or [])

    async def env_response(self, messages: Any, state: State, **kwargs: Any) -> list[Any]:
        replies = []
        for call in field_of(messages[-1], "tool_calls") or []:
            name, call_id = field_of(call, "name"), field_of(call, "id") or ""
            method = self._tool_methods.get(name)
            if method is None:
                content = f"Error: no tool named {name!r}; the tools are: {', '.join(sorted(self._tool_methods)) or 'none'}"
            else:
                try:
                    content = await call_tool(method, field_of(call, "arguments") or "{}")
                except Exception as exc:  # the model's call failed: it sees why, the rollout goes on
                    content = f"Error: {type(exc).__name__}: {exc}"
            replies.append(ToolMessage(content, tool_call_id=call_id, name=name))
        return replies

    async def rollout(self, client: Any, model: str, row: dict[str, Any], sampling_args: Any = None) -> State:
        state = await super().rollout(client, model, row, sampling_args)
        if "v1_trace" in state:
            trace = self.sync_trace(state)
            if state.get("error") is None:
                try:
                    await _hook(state["v1_task"], "finalize", state)
                except Exception as exc:  # the task's own code: the rollout's error, never a 0
                    state["error"] = error_record(exc)
            if state.get("stop_condition") == "episode_ended" and state.get("v1_exchange_stop"):
                state["stop_condition"] = state["v1_exchange_stop"]  # what ended the exchange inside run()
            if state.get("stop_condition") == "task_stop" and trace.stop_condition:
                state["stop_condition"] = trace.stop_condition
            trace.stop_condition = state.get("stop_condition")
        return state


def needs_runtime(task: Task) -> bool:
    """The task asks for a runtime: a container, or a hook, reward or metric with a `runtime` parameter."""
    return bool(task.NEEDS_CONTAINER or task.data.image) or _methods_ask_for_runtime(type(task))


@cache
def _methods_ask_for_runtime(task_type: type[Task]) -> bool:
    """Per task class (asked at every rollout): a setup/finalize it overrides, or a reward or metric, names `runtime`."""
    probe = task_type.__new__(task_type)
    hooks = [getattr(probe, n) for n in ("setup", "finalize") if getattr(task_type, n) is not getattr(Task, n)]
    return any("runtime" in inspect.signature(fn).parameters
               for fn in [*hooks, *marked(probe, "reward"), *marked(probe, "metric")])


def runtime_for(task: Task) -> SandboxRuntime:
    container = bool(task.data.image or task.NEEDS_CONTAINER)
    return SandboxRuntime(spec_for(task.data), "podman" if container else None, task.data.workdir if container else None)


async def _hook(task: Task, name: str, state: State) -> None:
    """The task's `setup` / `finalize`, when it overrides it, given what its parameters name."""
    if getattr(type(task), name) is getattr(Task, name):
        return
    await maybe_await(call_with(getattr(task, name), {"trace": state["v1_trace"], "task": task.data,
                                                       **({"runtime": state["v1_runtime"]} if "v1_runtime" in state else {})}))


def _role(message: Any) -> str | None:
    return field_of(message, "role")
