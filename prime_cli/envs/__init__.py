"""The environment-authoring API. Import it as `import prime_cli.envs as vf`.

Its shape follows Prime Intellect's verifiers (classic API). Inside prime, `import verifiers` and
`from verifiers.<module> import X` resolve to this package (verifiers_alias.py), so an environment written
for verifiers runs as written.
"""

import sys

from . import messages, verifiers_alias
from .chat_messages import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    Tool,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from .decorators import cleanup, stop
from .env_group import EnvGroup, EnvGroupRubric
from .environment import Environment
from .errors import (
    DatasetError,
    EmptyModelResponseError,
    EnvConfigError,
    EnvironmentLoadError,
    Error,
    FatalError,
    InfraError,
    ModelError,
    OverlongPromptError,
    RubricError,
    ToolCallError,
    ToolError,
    ToolParseError,
    UserInputError,
)
from .example_datasets import (
    BOXED_SYSTEM_PROMPT,
    THINK_BOXED_SYSTEM_PROMPT,
    extract_boxed_answer,
    extract_hash_answer,
    load_example_dataset,
)
from .loader import LocalEnvironmentWarning, load_environment
from .multiturn_env import MultiTurnEnv, maybe_await
from .parsers import MaybeThinkParser, Parser, ThinkParser, XMLParser
from .python_env import PythonEnv
from .rubrics import JudgeRubric, MathRubric, RolloutScore, Rubric, RubricGroup, ToolRubric
from .sandbox_env import SandboxEnv
from .singleturn_env import SingleTurnEnv
from .tool_env import StatefulToolEnv, ToolEnv
from .tool_schema import convert_func_to_tool_def, tool_schema
from .types import (
    ChatClient,
    ChatResponse,
    Info,
    Message,
    Messages,
    SamplingArgs,
    State,
    TrajectoryStep,
    Usage,
)

__all__ = [
    "BOXED_SYSTEM_PROMPT", "THINK_BOXED_SYSTEM_PROMPT", "AssistantMessage", "ChatClient", "ChatMessage", "ChatResponse",
    "DatasetError", "EmptyModelResponseError", "EnvConfigError", "EnvGroup", "EnvGroupRubric", "Environment",
    "EnvironmentLoadError", "Error", "FatalError", "Info", "InfraError", "JudgeRubric", "LocalEnvironmentWarning", "MathRubric",
    "MaybeThinkParser", "Message", "Messages", "ModelError", "MultiTurnEnv", "OverlongPromptError", "Parser", "PythonEnv",
    "RolloutScore", "Rubric", "RubricError", "RubricGroup", "SamplingArgs", "SandboxEnv", "SingleTurnEnv", "State",
    "StatefulToolEnv", "SystemMessage", "ThinkParser", "Tool", "ToolCall", "ToolCallError", "ToolEnv", "ToolError",
    "ToolMessage", "ToolParseError", "ToolRubric", "TrajectoryStep", "Usage", "UserInputError", "UserMessage", "XMLParser", "cleanup",
    "convert_func_to_tool_def", "extract_boxed_answer", "extract_hash_answer", "load_environment",
    "load_example_dataset", "maybe_await", "messages", "stop", "tool_schema",
]

verifiers_alias.serve_api(sys.modules[__name__])  # the API is complete: `import verifiers` may serve it
