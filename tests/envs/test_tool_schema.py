"""Tests of prime_cli.envs.tool_schema.

This module uses `from __future__ import annotations`, so every hint below is a string that the
schema builder has to resolve.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import typing
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Optional, Union

import pydantic
import pytest

from prime_cli.envs.errors import EnvConfigError
from prime_cli.envs.tool_schema import tool_name, tool_schema


class Color(str, enum.Enum):  # noqa: UP042 - the (str, Enum) form tool authors still write
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


def params(func, args_to_skip=()):
    return tool_schema(func, args_to_skip)["function"]["parameters"]


def props(func, args_to_skip=()):
    return params(func, args_to_skip)["properties"]


# --- overall shape ---------------------------------------------------------------------------


def test_schema_shape_and_name():
    def get_weather(city: str) -> str:
        """Look up the weather."""
        return city

    assert tool_schema(get_weather) == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Look up the weather.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }
    assert tool_name(get_weather) == "get_weather"


def test_hints_in_this_module_are_strings():
    def f(x: int) -> None: ...

    assert f.__annotations__["x"] == "int"  # proves the tests exercise string annotations
    assert props(f)["x"] == {"type": "integer"}


def test_async_function():
    async def fetch(url: str, retries: int = 3) -> str:
        """Fetch a page."""
        return url

    schema = tool_schema(fetch)
    assert schema["function"]["name"] == "fetch"
    assert schema["function"]["description"] == "Fetch a page."
    assert schema["function"]["parameters"]["properties"] == {
        "url": {"type": "string"},
        "retries": {"type": "integer", "default": 3},
    }
    assert schema["function"]["parameters"]["required"] == ["url"]


# --- type mapping ----------------------------------------------------------------------------


def test_primitive_types():
    def f(s: str, i: int, x: float, b: bool, n: None): ...

    assert props(f) == {
        "s": {"type": "string"},
        "i": {"type": "integer"},
        "x": {"type": "number"},
        "b": {"type": "boolean"},
        "n": {"type": "null"},
    }


def test_missing_hint_and_any_have_no_type():
    def f(a, b: Any, c: int): ...

    p = props(f)
    assert p["a"] == {}
    assert p["b"] == {}
    assert p["c"] == {"type": "integer"}


def test_arrays():
    def f(
        a: list[int],
        b: tuple[str, ...],
        c: set[float],
        d: list,
        e: typing.List[str],  # noqa: UP006
        g: Sequence[bool],
        h: tuple[int, str],
        k: tuple[int, int],
        m: list[list[str]],
    ): ...

    p = props(f)
    assert p["a"] == {"type": "array", "items": {"type": "integer"}}
    assert p["b"] == {"type": "array", "items": {"type": "string"}}
    assert p["c"] == {"type": "array", "items": {"type": "number"}}
    assert p["d"] == {"type": "array"}
    assert p["e"] == {"type": "array", "items": {"type": "string"}}
    assert p["g"] == {"type": "array", "items": {"type": "boolean"}}
    assert p["h"] == {
        "type": "array",
        "items": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        "minItems": 2,
        "maxItems": 2,
    }
    assert p["k"] == {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2}
    assert p["m"] == {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}


def test_objects():
    def f(a: dict[str, int], b: dict, c: dict[str, Any], d: typing.Dict[str, list[str]]): ...  # noqa: UP006

    p = props(f)
    assert p["a"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert p["b"] == {"type": "object"}
    assert p["c"] == {"type": "object"}
    assert p["d"] == {
        "type": "object",
        "additionalProperties": {"type": "array", "items": {"type": "string"}},
    }


def test_literal_enum_with_value_type():
    def f(mode: Literal["fast", "slow"], n: Literal[1, 2, 3], mixed: Literal["a", 1]): ...

    p = props(f)
    assert p["mode"] == {"type": "string", "enum": ["fast", "slow"]}
    assert p["n"] == {"type": "integer", "enum": [1, 2, 3]}
    assert p["mixed"] == {"enum": ["a", 1]}


def test_enum_classes():
    def f(color: Color, level: Level = Level.HIGH): ...

    p = props(f)
    assert p["color"] == {"type": "string", "enum": ["red", "blue"]}
    assert p["level"] == {"type": "integer", "enum": [1, 2], "default": 2}
    assert params(f)["required"] == ["color"]


def test_optional_is_the_inner_type():
    def f(a: Optional[int] = None, b: str | None = None, c: list[str] | None = None): ...  # noqa: UP045

    p = props(f)
    assert p["a"] == {"type": "integer", "default": None}
    assert p["b"] == {"type": "string", "default": None}
    assert p["c"] == {"type": "array", "items": {"type": "string"}, "default": None}
    assert params(f)["required"] == []


def test_optional_without_default_stays_required():
    def f(a: int | None): ...

    assert props(f)["a"] == {"type": "integer"}
    assert params(f)["required"] == ["a"]


def test_union_of_several_is_any_of():
    def f(a: Union[int, str], b: int | str | None = None, c: int | Any = 1): ...  # noqa: UP007

    p = props(f)
    assert p["a"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert p["b"] == {"anyOf": [{"type": "integer"}, {"type": "string"}], "default": None}
    assert p["c"] == {"default": 1}


def test_annotated_uses_the_inner_type():
    def f(a: Annotated[int, "some metadata"]): ...

    assert props(f)["a"] == {"type": "integer"}


class Point(pydantic.BaseModel):
    x: int


class Unit(str, enum.Enum):  # noqa: UP042 - the spelling most tools use
    C = "C"
    F = "F"


class Place(pydantic.BaseModel):
    """Where to look."""

    title: str  # a field named like the keyword the schema leaves out
    at: Point
    unit: Unit = Unit.C
    note: str | None = None


@dataclasses.dataclass
class Window:
    days: int
    hourly: bool = False


class Filters(typing.TypedDict):  # typing's TypedDict, which pydantic refuses on Python 3.11
    tags: list[str]
    near: Point
    limit: typing.NotRequired[int]


class Node(pydantic.BaseModel):
    name: str
    children: list[Node] = []


class Plain:
    pass


POINT = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


def titles(schema) -> list:
    """Every "title" keyword left in a schema (a property named "title" is not one)."""
    if isinstance(schema, list):
        return [t for item in schema for t in titles(item)]
    if not isinstance(schema, dict):
        return []
    found = [schema["title"]] if isinstance(schema.get("title"), str) else []
    return found + [t for key, value in schema.items() if key not in ("default", "enum") for t in titles(value)]


def refs(schema) -> list[str]:
    if isinstance(schema, list):
        return [r for item in schema for r in refs(item)]
    if not isinstance(schema, dict):
        return []
    found = [schema["$ref"]] if isinstance(schema.get("$ref"), str) else []
    return found + [r for value in schema.values() for r in refs(value)]


def test_pydantic_models_dataclasses_and_typed_dicts_have_their_fields_in_the_schema():
    def f(place: Place, window: Window, filters: Filters, points: list[Point], maybe: Point | None = None): ...

    p = props(f)
    assert p["place"] == {
        "type": "object",
        "description": "Where to look.",
        "properties": {
            "title": {"type": "string"},
            "at": POINT,
            "unit": {"type": "string", "enum": ["C", "F"], "default": "C"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        },
        "required": ["title", "at"],
    }
    assert p["window"] == {"type": "object", "required": ["days"],
                           "properties": {"days": {"type": "integer"}, "hourly": {"type": "boolean", "default": False}}}
    assert p["filters"] == {"type": "object", "required": ["tags", "near"],
                            "properties": {"tags": {"type": "array", "items": {"type": "string"}}, "near": POINT,
                                           "limit": {"type": "integer"}}}
    assert p["points"] == {"type": "array", "items": POINT}
    assert p["maybe"] == {**POINT, "default": None}  # Optional[X] is X, as for every other type
    assert titles(p) == [] and refs(params(f)) == [] and "$defs" not in params(f)


def test_a_recursive_model_keeps_its_definition_at_the_root_of_the_parameters():
    def f(tree: Node, other: list[Node]): ...

    schema = params(f)
    node = {"type": "object", "required": ["name"],
            "properties": {"name": {"type": "string"},
                           "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}, "default": []}}}
    assert schema["properties"] == {"tree": node, "other": {"type": "array", "items": node}}
    assert schema["$defs"] == {"Node": node}
    assert {ref.removeprefix("#/$defs/") for ref in refs(schema)} <= set(schema["$defs"])


def test_two_different_recursive_types_of_one_name_are_refused():
    other = pydantic.create_model("Node", label=(int, ...), more=(list["Node"], []))  # noqa: F821

    def f(a, b): ...

    f.__annotations__ = {"a": Node, "b": other}
    with pytest.raises(EnvConfigError, match="two different recursive types are named 'Node'"):
        tool_schema(f)


class Chain(typing.TypedDict):
    value: int
    next: Chain | None


def test_types_pydantic_cannot_describe_accept_anything():
    def f(a: Plain, b: list[Plain], c: typing.Callable[[int], int], d: int, e: Chain): ...

    assert props(f) == {"a": {}, "b": {"type": "array", "items": {}}, "c": {}, "d": {"type": "integer"},
                        "e": {"type": "object", "properties": {"value": {"type": "integer"}, "next": {}},
                              "required": ["value", "next"]}}  # a TypedDict inside itself is any value


def test_unresolvable_string_hint_counts_as_missing():
    class Local:
        pass

    def f(a: Local, b: int, c: list[str]): ...

    p = props(f)  # "Local" is not a module global, so get_type_hints fails on it
    assert p == {
        "a": {},
        "b": {"type": "integer"},
        "c": {"type": "array", "items": {"type": "string"}},
    }


# --- parameters: required, defaults, skipped ---------------------------------------------------


def test_required_and_defaults():
    sentinel = object()

    def f(
        a: int,
        b: str = "x",
        c: float = 0.5,
        d: list[int] = (1, 2),
        e: Any = sentinel,
        g: float = math.nan,
        h: dict = {"k": [1]},  # noqa: B006
    ): ...

    p = props(f)
    assert params(f)["required"] == ["a"]
    assert "default" not in p["a"]
    assert p["b"]["default"] == "x"
    assert p["c"]["default"] == 0.5
    assert p["d"]["default"] == [1, 2]  # tuple default written as JSON list
    assert "default" not in p["e"]  # not JSON-serialisable
    assert "default" not in p["g"]  # NaN is not valid JSON
    assert p["h"]["default"] == {"k": [1]}


def test_args_to_skip_and_varargs_are_left_out():
    def f(query: str, state: dict, *args: int, limit: int = 5, **kwargs: Any): ...

    p = params(f, args_to_skip=["state", "not_a_param"])
    assert list(p["properties"]) == ["query", "limit"]
    assert p["required"] == ["query"]


def test_self_and_cls_are_left_out():
    class Tools:
        def search(self, query: str) -> str:
            """Search."""
            return query

        @classmethod
        def make(cls, n: int): ...

    def unbound(self, x: int): ...

    assert list(props(Tools.search)) == ["query"]  # plain function, first parameter `self`
    assert list(props(Tools().search)) == ["query"]  # bound method
    assert list(props(Tools.make)) == ["n"]
    assert list(props(unbound)) == ["x"]
    assert tool_name(Tools().search) == "search"


# --- docstrings --------------------------------------------------------------------------------


@pytest.mark.parametrize("header", ["Args", "Arguments", "Parameters"])
def test_google_docstring(header):
    def f(city: str, days: int = 1, unit: str = "C"):
        pass

    f.__doc__ = f"""Get the forecast
        for a city.

        More details that are not part of the summary.

        {header}:
            city: Name of the city.
            days (int): How many days
                ahead to look.
            unit (str, optional): Temperature unit.
            ghost: Not a parameter.

        Returns:
            unit: Not an argument description.
        """
    schema = tool_schema(f)["function"]
    assert schema["description"] == "Get the forecast for a city."
    p = schema["parameters"]["properties"]
    assert p["city"]["description"] == "Name of the city."
    assert p["days"]["description"] == "How many days ahead to look."
    assert p["unit"]["description"] == "Temperature unit."
    assert "ghost" not in p


def test_google_section_right_after_summary():
    def f(x: int):
        """Do a thing.
        Args:
            x: The x.
        """

    schema = tool_schema(f)["function"]
    assert schema["description"] == "Do a thing."
    assert schema["parameters"]["properties"]["x"]["description"] == "The x."


def test_numpy_docstring():
    def f(a: int, b: int, text: str = "", flag: bool = False):
        """Combine things.

        Parameters
        ----------
        a, b : int
            The two numbers.
        text : str, optional
            Some text that goes on
            over two lines.
        flag
            A flag.
        ghost : int
            Not a parameter.

        Returns
        -------
        flag : bool
            Not an argument description.
        """

    schema = tool_schema(f)["function"]
    assert schema["description"] == "Combine things."
    p = schema["parameters"]["properties"]
    assert p["a"]["description"] == "The two numbers."
    assert p["b"]["description"] == "The two numbers."
    assert p["text"]["description"] == "Some text that goes on over two lines."
    assert p["flag"]["description"] == "A flag."
    assert "ghost" not in p


def test_sphinx_docstring():
    def f(path: str, mode: str = "r", size: int = 0):
        """Open a file.

        :param path: Where the file
            lives.
        :type path: str
        :param str mode: How to open it.
        :param ghost: Not a parameter.
        :returns: Nothing useful.
        """

    schema = tool_schema(f)["function"]
    assert schema["description"] == "Open a file."
    p = schema["parameters"]["properties"]
    assert p["path"]["description"] == "Where the file lives."
    assert p["mode"]["description"] == "How to open it."
    assert "description" not in p["size"]
    assert "ghost" not in p


def test_no_docstring():
    def f(x: int): ...

    schema = tool_schema(f)["function"]
    assert schema["description"] == ""
    assert schema["parameters"]["properties"] == {"x": {"type": "integer"}}


# --- errors ----------------------------------------------------------------------------------


def test_lambda_is_rejected():
    with pytest.raises(EnvConfigError, match="named function|def "):
        tool_schema(lambda x: x)
    with pytest.raises(ValueError):  # EnvConfigError is a ValueError
        tool_name(lambda x: x)


def test_not_callable_is_rejected():
    with pytest.raises(EnvConfigError, match="must be a function"):
        tool_schema("search")


def test_invalid_name_is_rejected():
    def f(): ...

    f.__name__ = "bad name!"
    with pytest.raises(EnvConfigError, match="no valid name"):
        tool_name(f)


def test_callable_without_name_is_rejected():
    class Caller:
        def __call__(self, x: int): ...

    with pytest.raises(EnvConfigError, match="no valid name"):
        tool_schema(Caller())
