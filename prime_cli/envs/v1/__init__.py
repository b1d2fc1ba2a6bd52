"""verifiers' v1 authoring API, as prime serves it: `import verifiers.v1 as vf` inside prime means this.

A v1 environment is a `Taskset` (config in, tasks out) of `Task`s (a `TaskData` row plus `@vf.reward`,
`@vf.metric` and `@vf.stop` methods reading the rollout's `Trace`), optionally with `Toolset`s whose
`@vf.tool` methods the model may call, a `SingleAgentEnv` whose `run()` drives the exchange, and a
`Runtime` (a sandbox) for tasks that run programs. prime runs it on its own agent loop (taskset_env.py),
the `null` harness of verifiers; Harbor task folders are `HarborTaskset` (harbor.py). What verifiers' v1
API has beyond that (environments with several agent seats, third-party harnesses, interception, judges)
raises, when a taskset uses it, an AttributeError naming the missing piece (`not_provided`).
"""


from __future__ import annotations

from typing import Any

from .decorators import intercept, metric, reward, stop, tool
from .episodes import Agent, Agents, Interaction, Segment, SingleAgentEnv, SingleAgentEnvConfig
from .errors import (
    EnvError,
    HarnessError,
    InterceptionError,
    ProviderError,
    RolloutError,
    SandboxError,
    TaskError,
    ToolsetError,
    TunnelError,
)
from .harbor import HarborConfig, HarborData, HarborTask, HarborTaskset
from .runtime import ProgramResult, Runtime
from .state import State
from .task import Task, TaskConfig, TaskData, TaskResources, TaskTimeout, WireTaskData
from .taskset import SharedTasksetConfig, Taskset, TasksetConfig
from .toolset import SharedToolsetConfig, Toolset, ToolsetConfig
from .trace import TRACE_VERSION, Error, Reward, Trace
from .types import (
    ID,
    AssistantMessage,
    ContentPart,
    ImageUrlContentPart,
    ImageUrlSource,
    Message,
    Messages,
    SystemMessage,
    TextContentPart,
    Tool,
    ToolCall,
    ToolMessage,
    UserMessage,
    content_text,
)

StateT = State

__all__ = [
    "Agent", "Agents", "Interaction", "Segment", "SingleAgentEnv", "SingleAgentEnvConfig",
    "HarborConfig", "HarborData", "HarborTask", "HarborTaskset",
    "ID", "TRACE_VERSION", "AssistantMessage", "ContentPart", "EnvError", "Error", "HarnessError", "ImageUrlContentPart",
    "ImageUrlSource", "InterceptionError", "Message", "Messages", "ProgramResult", "ProviderError", "Reward",
    "RolloutError", "Runtime", "SandboxError", "SharedTasksetConfig", "SharedToolsetConfig", "State", "StateT",
    "SystemMessage", "Task", "TaskConfig", "TaskData", "TaskError", "TaskResources", "TaskTimeout", "Taskset",
    "TasksetConfig", "TextContentPart", "Tool", "ToolCall", "ToolMessage", "Toolset", "ToolsetConfig", "ToolsetError",
    "Trace", "TunnelError", "UserMessage", "WireTaskData", "content_text", "intercept", "metric", "reward", "stop", "tool",
]

# what verifiers' v1 API has that prime does not run yet, by name: why
NOT_PROVIDED = {
    **dict.fromkeys(("Env", "EnvConfig", "AgentConfig", "Episode", "make_agent"),
                    "an environment with several agent seats (Env.run over Agents)"),
    **dict.fromkeys(("Harness", "HarnessConfig", "HarnessSession", "ACPHarness", "ACPConfig"),
                    "a harness other than prime's own chat loop (verifiers' null harness)"),
    **dict.fromkeys(("Judge", "JudgeConfig", "Judges", "JudgeResponse", "JudgeView", "ReferenceJudge",
                     "ReferenceJudgeConfig", "RubricJudge", "RubricJudgeConfig", "Criterion", "parse_judge_choice"),
                    "judges"),
    **dict.fromkeys(("Request", "Response", "InterceptRecord"), "request and response interception"),
    **dict.fromkeys(("DockerConfig", "PrimeConfig", "SubprocessConfig", "RuntimeConfig", "RuntimeInfo",
                     "RuntimeProcess"), "runtime configs"),
}


def not_provided(name: str) -> str:
    why = NOT_PROVIDED.get(name)
    what = f"verifiers.v1.{name}"
    if why:
        return f"{what} ({why}) is not supported by prime yet; prime runs v1 tasksets on its own chat and tool loop"
    return f"prime's verifiers.v1 has no {name!r}"


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(not_provided(name), name=name, obj=None)
