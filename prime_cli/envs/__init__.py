"""The environment-authoring API. Import it as `import prime_cli.envs as vf`.

Its shape follows Prime Intellect's verifiers (classic API) so an environment written for
verifiers ports by changing its import line.
"""

from . import messages
from .decorators import cleanup, stop
from .env_group import EnvGroup, EnvGroupRubric
from .environment import Environment
from .errors import (
    DatasetError,
    EmptyModelResponseError,
    EnvConfigError,
    EnvironmentLoadError,
    Error,
    InfraError,
    ModelError,
    OverlongPromptError,
    RubricError,
    ToolCallError,
    ToolError,
    ToolParseError,
)
from .loader import LocalEnvironmentWarning, load_environment
from .multiturn_env import MultiTurnEnv
from .parsers import MaybeThinkParser, Parser, ThinkParser, XMLParser
from .python_env import PythonEnv
from .rubrics import JudgeRubric, RolloutScore, Rubric, RubricGroup
from .sandbox_env import SandboxEnv
from .singleturn_env import SingleTurnEnv
from .tool_env import StatefulToolEnv, ToolEnv
from .tool_schema import tool_schema
from .types import ChatClient, ChatResponse, Info, Message, Messages, SamplingArgs, State, Usage

__all__ = [
    "ChatClient", "ChatResponse", "DatasetError", "EmptyModelResponseError", "EnvConfigError",
    "EnvGroup", "EnvGroupRubric", "Environment", "EnvironmentLoadError", "Error", "Info", "InfraError",
    "JudgeRubric", "LocalEnvironmentWarning", "MaybeThinkParser", "Message", "Messages", "ModelError", "MultiTurnEnv",
    "OverlongPromptError", "Parser", "PythonEnv", "RolloutScore", "Rubric", "RubricError", "RubricGroup",
    "SamplingArgs", "SandboxEnv", "SingleTurnEnv", "State", "StatefulToolEnv", "ThinkParser", "ToolCallError",
    "ToolEnv", "ToolError", "ToolParseError", "Usage", "XMLParser", "cleanup", "load_environment",
    "messages", "stop", "tool_schema",
]
