"""Parsers: extract answers from completions and score their format (verifiers-compatible API)."""

from .parser import Parser
from .think_parser import MaybeThinkParser, ThinkParser
from .xml_parser import XMLParser

__all__ = ["Parser", "XMLParser", "ThinkParser", "MaybeThinkParser"]
