"""The embedded default model: materialise it, start/stop a vLLM server for it (see DESIGN.md).

Nothing here imports torch, transformers or vllm: conversion and serving run in child processes.
"""

from .errors import ServeError

__all__ = ["ServeError"]
