"""Options that several commands take, declared once (flags and help), and the parsing of a bare `-R`."""

from __future__ import annotations

from typing import Annotated

import typer
from typer.core import TyperCommand

# how a command reaches its model: `prime eval run` and `prime gepa run`
ModelOpt = Annotated[str | None, typer.Option(
    "-m", "--model",
    help="The model that answers the environment's prompts: an endpoint id from the registry, a model id used "
    "with -b, a LiteLLM provider name (anthropic/claude-sonnet-4) or a model LiteLLM lists (gpt-4.1-mini: "
    "OpenAI), or a built-in model served here: local "
    "(the embedded SmolLM2) or local-moe (a small MoE upcycled from it). Default: local.")]
# `prime env check`: its -m names the judge model of JudgeRubric rewards (the policy model is never called)
JudgeModelOpt = Annotated[str | None, typer.Option(
    "-m", "--model",
    help="The judge model that scores JudgeRubric rewards: an endpoint id from the registry, a model id used "
    "with -b, or a LiteLLM provider name. Default: none, and judge rewards are skipped.")]
BaseUrlOpt = Annotated[str | None, typer.Option(
    "-b", "--api-base-url", help="OpenAI-compatible base URL of the -m model (e.g. http://localhost:8000/v1).")]
ApiKeyVarOpt = Annotated[str | None, typer.Option(
    "-k", "--api-key-var", help="NAME of the environment variable holding the API key (never the key).")]
EndpointsPathOpt = Annotated[str | None, typer.Option(
    "-e", "--endpoints-path",
    help="Endpoint registry: a TOML file, or a Python file with an ENDPOINTS dict (read, not run). "
    "Default: configs/endpoints.toml, else configs/endpoints.py.")]
MaxRetriesOpt = Annotated[int | None, typer.Option(
    "--max-retries", help="Retries per model call on 429/5xx/timeouts. Default 3.")]
# `prime eval run`: where environments that run model-written code run it
SandboxOpt = Annotated[str | None, typer.Option(
    "--sandbox", metavar="PROVIDER",
    help="Sandbox provider for environments that run model-written code (SandboxEnv, PythonEnv, math-python): "
    "bwrap (bubblewrap, the default on Linux), podman, docker, or none (unsandboxed: a plain process, said in "
    "the summary and metadata). Default: $PRIME_SANDBOX, else the environment's choice, else bwrap.")]
# `prime eval run`, `prime gepa run` and `prime env check`
EnvArgsOpt = Annotated[str | None, typer.Option(
    "-a", "--env-args", help="JSON of arguments for the environment's load_environment().")]

RESUME_FLAGS = ("-R", "--resume")
BARE = ""  # the value of a -R/--resume given without one; each command says what that means


def with_bare_values(args: list[str]) -> list[str]:
    """`args` with BARE after each -R/--resume that has no value: one last, or one followed by another flag."""
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            return out + args[i:]
        out.append(arg)
        if arg in RESUME_FLAGS and (i + 1 == len(args) or args[i + 1].startswith("-")):
            out.append(BARE)
    return out


class BareResumeCommand(TyperCommand):
    """A command whose -R/--resume may be given bare: its parser reads that as BARE, never as a made-up
    value, so that what the command says about it names only what the user typed."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, with_bare_values(args))
