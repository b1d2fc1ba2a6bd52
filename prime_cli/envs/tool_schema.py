"""Build OpenAI function-tool schemas from plain Python functions.

A tool is an ordinary (sync or async) function. Its name becomes the tool name, the first paragraph
of its docstring the tool description, and its parameters, read from type hints, the JSON schema of
the arguments. Parameter descriptions are read from Google, NumPy or Sphinx style docstrings.
Parameters the environment injects itself (`args_to_skip`) are left out of the schema. A parameter
typed as a pydantic model, a dataclass or a TypedDict is described field by field (the tool is
called with the JSON object the model sent, not an instance of the class).
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import enum
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any

from prime_cli.envs.errors import EnvConfigError

_VALID_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_PRIMITIVES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_ARRAYS = {list, tuple, set, frozenset, cabc.Iterable, cabc.Sequence, cabc.MutableSequence}
_ARRAYS |= {cabc.Set, cabc.MutableSet}
_OBJECTS = (dict, cabc.Mapping)
_MISSING = object()

_GOOGLE_HEADER = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters)\s*:$"
)
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\(.*?\))?\s*:(?:\s+(.*))?$")
_NUMPY_HEADERS = ("Parameters", "Other Parameters")
_SPHINX_ENTRY = re.compile(
    r"^:(?:param|parameter|arg|argument|key|keyword)\s+(?:[^:]*\s)?\*{0,2}(\w+)\s*:\s*(.*)$"
)


def tool_name(func: Callable[..., Any]) -> str:
    """The tool name of `func` (its `__name__`), or EnvConfigError if it has no usable one."""
    if not callable(func):
        raise EnvConfigError(f"a tool must be a function, got {type(func).__name__}: {func!r:.60}")
    name = getattr(func, "__name__", None)
    if name == "<lambda>":
        raise EnvConfigError(
            "a lambda cannot be a tool: '<lambda>' is not a valid tool name; use a named function "
            "(`def your_tool_name(...)`)"
        )
    if not isinstance(name, str) or not _VALID_NAME.match(name):
        raise EnvConfigError(
            f"tool {func!r:.60} has no valid name ({name!r}); a tool name is 1-64 letters, "
            "digits, '_' or '-': use (or wrap it in) a named function"
        )
    return name


def tool_schema(func: Callable[..., Any], args_to_skip: Iterable[str] = ()) -> dict[str, Any]:
    """The OpenAI function-tool schema of `func`, leaving out the parameters in `args_to_skip`."""
    name = tool_name(func)
    skip = set(args_to_skip)
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise EnvConfigError(f"cannot read the parameters of tool {name!r}: {exc}") from exc
    hints = _type_hints(func)
    summary, param_docs = _parse_docstring(inspect.getdoc(func) or "")

    properties: dict[str, Any] = {}
    required: list[str] = []
    defs: dict[str, Any] = {}  # definitions of recursive types, where their "#/$defs/Name" references point
    for index, param in enumerate(signature.parameters.values()):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or param.name in skip:
            continue
        if index == 0 and param.name in ("self", "cls"):  # a function taken from a class body
            continue
        hint = hints.get(param.name, Any)
        prop = _type_schema(hint, defs)
        if param_docs.get(param.name):
            prop["description"] = param_docs[param.name]
        if param.default is param.empty:
            required.append(param.name)
        else:
            default = _json_value(param.default)
            if default is not _MISSING:
                prop["default"] = default
        properties[param.name] = prop

    parameters = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    if defs:
        parameters["$defs"] = defs
    return {"type": "function", "function": {"name": name, "description": summary, "parameters": parameters}}


def _type_hints(func: Callable[..., Any]) -> dict[str, Any]:
    """Resolved type hints; unresolvable string hints (e.g. local classes) count as missing."""
    with contextlib.suppress(Exception):
        return typing.get_type_hints(func, include_extras=True)
    raw = getattr(func, "__annotations__", None) or {}
    namespace = getattr(inspect.unwrap(func), "__globals__", {})
    hints = {}
    for key, value in raw.items():
        if isinstance(value, str):
            try:
                value = eval(value, dict(namespace))  # what get_type_hints does, per hint
            except Exception:
                continue
        hints[key] = value
    return hints


def _type_schema(tp: Any, defs: dict[str, Any], within: tuple[type, ...] = ()) -> dict[str, Any]:
    """JSON schema of one type hint; {} (any value) for what cannot be expressed. `within`: the
    TypedDicts being written (one that holds itself is any value there)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _type_schema(args[0], defs, within)
    if tp is Any or tp is inspect.Parameter.empty:
        return {}
    if tp is None or tp is type(None):
        return {"type": "null"}
    if isinstance(tp, type) and tp in _PRIMITIVES:
        return {"type": _PRIMITIVES[tp]}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_schema([member.value for member in tp])
    if origin is typing.Literal:
        return _enum_schema([v.value if isinstance(v, enum.Enum) else v for v in args])
    if origin is typing.Union or origin is types.UnionType:
        # Optional[X] is X: None only says the parameter may be left out (it has a default).
        options = _dedupe([_type_schema(arg, defs, within) for arg in args if arg is not type(None)])
        if {} in options:
            return {}
        return options[0] if len(options) == 1 else {"anyOf": options}
    base = origin or tp
    if typing.is_typeddict(base):
        return _typed_dict_schema(base, defs, within)
    if isinstance(base, type) and issubclass(base, _OBJECTS):
        values = _type_schema(args[1], defs, within) if len(args) == 2 else {}
        return {"type": "object", **({"additionalProperties": values} if values else {})}
    if isinstance(base, type) and base in _ARRAYS:
        schema: dict[str, Any] = {"type": "array"}
        if base is tuple and args and args[-1] is not Ellipsis and args != ((),):
            items = _dedupe([_type_schema(arg, defs, within) for arg in args])  # fixed-length tuple[A, B]
            schema["items"] = items[0] if len(items) == 1 else {"anyOf": items}
            schema["minItems"] = schema["maxItems"] = len(args)
        elif args and args != ((),):
            schema["items"] = _type_schema(args[0], defs, within)
        return schema
    return _pydantic_schema(tp, defs)  # pydantic models, dataclasses, ...; {} for what pydantic cannot describe


def _typed_dict_schema(td: type, defs: dict[str, Any], within: tuple[type, ...]) -> dict[str, Any]:
    """Written here rather than by pydantic, which refuses typing.TypedDict before Python 3.12."""
    if td in within:
        return {}
    try:
        hints = typing.get_type_hints(td, include_extras=True)
    except Exception:  # noqa: BLE001 - an unresolvable hint, as for a tool's own parameters
        return {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for key, hint in hints.items():
        # __required_keys__ misses NotRequired[...] written as a string (`from __future__ import annotations`)
        wrapper = typing.get_origin(hint)
        if wrapper is typing.Required or (key in td.__required_keys__ and wrapper is not typing.NotRequired):
            required.append(key)
        if wrapper in (typing.Required, typing.NotRequired):
            hint = typing.get_args(hint)[0]
        properties[key] = _type_schema(hint, defs, (*within, td))
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if td.__doc__:
        schema["description"] = inspect.cleandoc(td.__doc__)
    return {**schema, "required": required} if required else schema


def _pydantic_schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """pydantic's JSON schema of `tp`, titles left out and its definitions written in place, but for a
    recursive type, whose definition goes to `defs`; {} (any value) where pydantic has none."""
    import pydantic  # lazy: heavy

    try:
        schema = pydantic.TypeAdapter(tp).json_schema()
    except Exception:  # noqa: BLE001 - a type pydantic cannot describe accepts any value, as before
        return {}
    return _Inliner(schema.pop("$defs", {}), defs).resolve(schema, ())


_DATA_KEYS = ("default", "enum", "const", "examples")  # hold values, not schemas: left as they are
_DEFS_REF = "#/$defs/"


class _Inliner:
    """Replaces pydantic's "#/$defs/Name" references with the definitions they name (the model reads one
    schema, not a puzzle), except inside a definition's own expansion: a recursive type."""

    def __init__(self, local: dict[str, Any], defs: dict[str, Any]):
        self.local, self.defs, self.hoisting = local, defs, set()

    def resolve(self, node: Any, expanding: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [self.resolve(item, expanding) for item in node]
        if not isinstance(node, dict):
            return node
        out = {key: value if key in _DATA_KEYS else self.resolve(value, expanding)
               for key, value in node.items()
               # an OpenAPI discriminator maps to definitions that are written in place here
               if not (key == "title" and isinstance(value, str)) and key != "discriminator"}
        ref = out.get("$ref")
        name = ref.removeprefix(_DEFS_REF) if isinstance(ref, str) and ref.startswith(_DEFS_REF) else None
        if name not in self.local:
            return out
        if name in expanding:
            self._hoist(name)
            return out
        del out["$ref"]
        return {**self.resolve(self.local[name], (*expanding, name)), **out}

    def _hoist(self, name: str) -> None:
        if name in self.hoisting:
            return
        self.hoisting.add(name)
        body = self.resolve(self.local[name], (name,))
        if self.defs.setdefault(name, body) != body:
            raise EnvConfigError(f"two different recursive types are named {name!r} in one tool's parameters; "
                                 "rename one")


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    """`{"type": ..., "enum": values}`; the type is left out when the values mix JSON types."""
    json_types = {"null" if v is None else _PRIMITIVES.get(type(v)) for v in values}
    if len(json_types) == 1 and None not in json_types:
        return {"type": json_types.pop(), "enum": values}
    return {"enum": values}


def _dedupe(items: list[Any]) -> list[Any]:
    return [item for index, item in enumerate(items) if item not in items[:index]]


def _json_value(value: Any) -> Any:
    """`value` as plain JSON data, or _MISSING if it cannot be written as JSON."""
    if isinstance(value, enum.Enum):
        value = value.value
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return _MISSING


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _is_rule(line: str) -> bool:
    """A NumPy section underline (`----------`)."""
    return bool(re.fullmatch(r"\s*-{3,}\s*", line))


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(summary, {parameter: description}) of a cleaned docstring."""
    lines = doc.expandtabs().splitlines()
    summary: list[str] = []
    for index, line in enumerate(lines):
        text = line.strip()
        next_line = lines[index + 1] if index + 1 < len(lines) else ""
        if _GOOGLE_HEADER.match(text) or text.startswith(":") or _is_rule(next_line):
            break
        if text:
            summary.append(text)
        elif summary:
            break
    entries: dict[str, list[str]] = {}
    _google_params(lines, entries)
    _numpy_params(lines, entries)
    _sphinx_params(lines, entries)
    params = {name: " ".join(part for part in parts if part) for name, parts in entries.items()}
    return " ".join(summary), params


def _google_params(lines: list[str], entries: dict[str, list[str]]) -> None:
    for start, header in enumerate(lines):
        if not _GOOGLE_HEADER.match(header.strip()):
            continue
        entry_indent, current = None, None
        for line in lines[start + 1 :]:
            if not line.strip():
                continue
            indent = _indent(line)
            if indent <= _indent(header):
                break
            entry_indent = indent if entry_indent is None else entry_indent
            if indent <= entry_indent:
                match = _GOOGLE_ENTRY.match(line.strip())
                current = match[1] if match else None
                if current:
                    entries[current] = [match[2] or ""]
            elif current:
                entries[current].append(line.strip())


def _numpy_params(lines: list[str], entries: dict[str, list[str]]) -> None:
    for start in range(len(lines) - 1):
        header = lines[start]
        if header.strip() not in _NUMPY_HEADERS or not _is_rule(lines[start + 1]):
            continue
        names: list[str] = []
        for index in range(start + 2, len(lines)):
            line = lines[index]
            if not line.strip():
                continue
            next_is_rule = index + 1 < len(lines) and _is_rule(lines[index + 1])
            if next_is_rule or _indent(line) < _indent(header):
                break
            if _indent(line) == _indent(header):
                names = [n.strip().lstrip("*") for n in line.split(":", 1)[0].split(",")]
                for name in names:
                    entries[name] = []
            else:
                for name in names:
                    entries[name].append(line.strip())


def _sphinx_params(lines: list[str], entries: dict[str, list[str]]) -> None:
    current = None
    for line in lines:
        text = line.strip()
        match = _SPHINX_ENTRY.match(text)
        if match:
            current = match[1]
            entries[current] = [match[2]]
        elif not text or text.startswith(":"):
            current = None
        elif current:
            entries[current].append(text)


def convert_func_to_tool_def(func: Callable[..., Any]) -> Any:
    """`tool_schema(func)` as a verifiers-style flat `Tool` (name, description, parameters)."""
    from .chat_messages import Tool  # lazy: already loaded

    return Tool(tool_schema(func)["function"])
