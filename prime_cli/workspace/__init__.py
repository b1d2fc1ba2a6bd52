"""Workspace engine: environment packages (init, install, list, info) and `prime lab setup`.

The CLI (prime_cli/cli/env_cmd.py, lab_cmd.py) only parses flags and calls these functions.
"""

from .catalog import EnvironmentEntry, EnvironmentInfo, environment_info, list_environments
from .errors import WorkspaceError
from .install import install_environment, install_target
from .lab import FileAction, setup_lab
from .names import check_env_name, module_name
from .scaffold import init_environment

__all__ = [
    "EnvironmentEntry", "EnvironmentInfo", "FileAction", "WorkspaceError", "check_env_name",
    "environment_info", "init_environment", "install_environment", "install_target", "list_environments",
    "module_name", "setup_lab",
]
