"""The pure-Python tool helpers: JSON schemas from type hints and docstrings, the Tool class, @tool, as_tool,
and Tool.invoke(), which turns a Python tool's return value or exception into the (content, is_error) pair the
agent loop sends back to the model.

These run without the compiled module: they import tooloop._tools only. No network, no mock server needed.
Syntax stays Python 3.9-compatible (the package supports 3.9+); `X | None` is tested through exec on 3.10+.
"""

import collections.abc
import dataclasses
import datetime
import enum
import json
import logging
import sys
import typing
from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Set, Tuple, Union

import pytest

from tooloop._tools import Tool, as_tool, function_schema, tool

try:
    from typing import Annotated, TypedDict
except ImportError:  # pragma: no cover - 3.9 has both; kept for clarity
    from typing_extensions import Annotated, TypedDict  # type: ignore


def props(fn: Callable[..., Any]) -> Dict[str, Any]:
    return function_schema(fn)["properties"]


# ------------------------------------------------------------------------------------------------ scalar hints


def test_str_hint_maps_to_string():
    def f(a: str): ...

    assert props(f)["a"] == {"type": "string"}


def test_int_hint_maps_to_integer():
    def f(a: int): ...

    assert props(f)["a"] == {"type": "integer"}


def test_float_hint_maps_to_number():
    def f(a: float): ...

    assert props(f)["a"] == {"type": "number"}


def test_bool_hint_maps_to_boolean_not_integer():
    # bool is a subclass of int: the order of the checks matters.
    def f(a: bool): ...

    assert props(f)["a"] == {"type": "boolean"}


def test_any_and_missing_annotation_map_to_any_json_value():
    def f(a: Any, b, c: object): ...

    p = props(f)
    assert p["a"] == {} and p["b"] == {} and p["c"] == {}


def test_datetime_and_date_map_to_strings_with_format():
    def f(when: datetime.datetime, day: datetime.date, at: datetime.time): ...

    p = props(f)
    assert p["when"] == {"type": "string", "format": "date-time"}
    assert p["day"] == {"type": "string", "format": "date"}
    assert p["at"] == {"type": "string", "format": "time"}


# ------------------------------------------------------------------------------------------------ containers


def test_list_hints_map_to_array_with_items():
    def f(a: list, b: List[int], c: Sequence[str], d: "list[float]", e: collections.abc.Sequence): ...

    p = props(f)
    assert p["a"] == {"type": "array"}
    assert p["b"] == {"type": "array", "items": {"type": "integer"}}
    assert p["c"] == {"type": "array", "items": {"type": "string"}}
    assert p["d"] == {"type": "array", "items": {"type": "number"}}
    assert p["e"] == {"type": "array"}


def test_nested_list_maps_to_nested_arrays():
    def f(grid: List[List[bool]]): ...

    assert props(f)["grid"] == {"type": "array", "items": {"type": "array", "items": {"type": "boolean"}}}


def test_tuple_hints_map_to_arrays():
    def f(a: tuple, b: Tuple[int, ...], c: Tuple[int, str]): ...

    p = props(f)
    assert p["a"] == {"type": "array"}
    assert p["b"] == {"type": "array", "items": {"type": "integer"}}
    assert p["c"] == {
        "type": "array",
        "prefixItems": [{"type": "integer"}, {"type": "string"}],
        "minItems": 2,
        "maxItems": 2,
    }


def test_tuple_input_arrives_as_tuple():
    @tool
    def f(pair: Tuple[int, str], nums: Tuple[int, ...]) -> str:
        return f"{type(pair).__name__}{pair} {type(nums).__name__}{nums}"

    assert f.invoke({"pair": [1, "a"], "nums": [1, 2]}) == ("tuple(1, 'a') tuple(1, 2)", False)


def test_set_of_str_maps_to_unique_array_and_arrives_as_set():
    @tool
    def f(tags: Set[str]) -> str:
        return repr(sorted(tags)) + type(tags).__name__

    assert f.input_schema["properties"]["tags"] == {"type": "array", "uniqueItems": True, "items": {"type": "string"}}
    assert f.invoke({"tags": ["b", "a"]}) == ("['a', 'b']set", False)


def test_dict_hints_map_to_object_with_additional_properties():
    def f(a: dict, b: Dict[str, int], c: "dict[str, List[str]]"): ...

    p = props(f)
    assert p["a"] == {"type": "object"}
    assert p["b"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert p["c"] == {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}}


def test_dict_with_non_str_keys_is_refused():
    def f(counts: Dict[int, int]): ...

    with pytest.raises(TypeError, match="counts") as e:
        function_schema(f)
    assert "keys must be str" in str(e.value)


# ------------------------------------------------------------------------------------------------ Optional / unions


def test_optional_makes_nullable_type_list_and_default_makes_it_not_required():
    def f(a: Optional[str] = None, b: Optional[int] = 3): ...

    s = function_schema(f)
    assert s["properties"]["a"] == {"type": ["string", "null"], "default": None}
    assert s["properties"]["b"] == {"type": ["integer", "null"], "default": 3}
    assert s["required"] == []


def test_optional_without_default_is_required_and_nullable():
    def f(a: Optional[str]): ...

    s = function_schema(f)
    assert s["properties"]["a"] == {"type": ["string", "null"]}
    assert s["required"] == ["a"]


def test_none_default_without_optional_still_accepts_null():
    def f(a: str = None): ...  # type: ignore[assignment]

    assert props(f)["a"] == {"type": ["string", "null"], "default": None}


@pytest.mark.skipif(sys.version_info < (3, 10), reason="X | None needs Python 3.10")
def test_pep604_union_with_none_is_the_same_as_optional():
    ns: Dict[str, Any] = {}
    exec("def f(a: str | None = None, b: int | str = 1): ...", ns)
    p = props(ns["f"])
    assert p["a"] == {"type": ["string", "null"], "default": None}
    assert p["b"] == {"type": ["integer", "string"], "default": 1}


def test_union_of_scalars_is_a_type_list_and_of_objects_is_any_of():
    @dataclasses.dataclass
    class A:
        a: int

    @dataclasses.dataclass
    class B:
        b: str

    def f(x: Union[int, str], y: Union[A, B, None]): ...

    p = props(f)
    assert p["x"] == {"type": ["integer", "string"]}
    assert [s.get("type") for s in p["y"]["anyOf"]] == ["object", "object", "null"]
    assert p["y"]["anyOf"][0]["properties"] == {"a": {"type": "integer"}}


# ------------------------------------------------------------------------------------------------ Literal / Enum


def test_literal_of_strings_maps_to_string_enum():
    def f(unit: Literal["c", "f"] = "c"): ...

    assert props(f)["unit"] == {"type": "string", "enum": ["c", "f"], "default": "c"}


def test_literal_of_mixed_types_maps_to_enum_only():
    def f(x: Literal["a", 1, True]): ...

    assert props(f)["x"] == {"enum": ["a", 1, True]}


def test_optional_literal_adds_null_to_type_and_enum():
    def f(x: Optional[Literal["a", "b"]] = None): ...

    assert props(f)["x"] == {"type": ["string", "null"], "enum": ["a", "b", None], "default": None}


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


def test_enum_maps_to_enum_of_values_and_default_records_the_value():
    def f(color: Color, level: Level = Level.LOW): ...

    p = props(f)
    assert p["color"] == {"type": "string", "enum": ["red", "green"]}
    # IntEnum is an int subclass: it must still be an enum, not a bare integer.
    assert p["level"] == {"type": "integer", "enum": [1, 2], "default": 1}


def test_enum_input_arrives_as_the_enum_member():
    @tool
    def paint(color: Color) -> str:
        return repr(color)

    assert paint.invoke({"color": "green"}) == ("<Color.GREEN: 'green'>", False)


def test_enum_input_outside_the_values_is_an_error_result():
    @tool
    def paint(color: Color) -> str:
        return "unreachable"

    content, is_error = paint.invoke({"color": "purple"})
    assert is_error
    assert "color" in content and "purple" in content


# ------------------------------------------------------------------------------------------------ Annotated


def test_annotated_string_becomes_the_description():
    def f(city: Annotated[str, "The city name"]): ...

    assert props(f)["city"] == {"type": "string", "description": "The city name"}


def test_annotated_object_with_description_attribute_is_accepted():
    class FieldInfo:  # pydantic.Field-like
        def __init__(self, description: str) -> None:
            self.description = description

    def f(n: Annotated[int, FieldInfo("How many")] = 2): ...

    assert props(f)["n"] == {"type": "integer", "description": "How many", "default": 2}


def test_annotated_dict_is_merged_as_raw_schema():
    def f(n: Annotated[int, {"minimum": 0}, "count"]): ...

    assert props(f)["n"] == {"type": "integer", "minimum": 0, "description": "count"}


def test_annotated_description_wins_over_docstring():
    def f(city: Annotated[str, "from Annotated"], days: int):
        """Forecast.

        Args:
            city: from the docstring
            days: number of days
        """

    p = props(f)
    assert p["city"]["description"] == "from Annotated"
    assert p["days"]["description"] == "number of days"


# ------------------------------------------------------------------------------------------------ TypedDict / dataclass


class _AddressBase(TypedDict):
    street: str


class Address(_AddressBase, total=False):
    """A postal address."""

    zip: str


def test_nested_typeddict_maps_to_object_with_required_keys():
    def f(address: Address, extra: List[Address]): ...

    p = props(f)
    assert p["address"] == {
        "type": "object",
        "description": "A postal address.",
        "properties": {"street": {"type": "string"}, "zip": {"type": "string"}},
        "required": ["street"],
        "additionalProperties": False,
    }
    assert p["extra"]["items"] == p["address"]


@dataclasses.dataclass
class Point:
    """A point on the map.

    Attributes:
        x: Longitude in degrees.
        y: Latitude in degrees.
    """

    x: float
    y: float
    label: str = "here"
    tags: List[str] = dataclasses.field(default_factory=list, metadata={"description": "free-form tags"})


@dataclasses.dataclass
class Route:
    start: Point
    stops: List[Point]


def test_dataclass_maps_to_object_with_properties_required_and_docs():
    def f(p: Point): ...

    assert props(f)["p"] == {
        "type": "object",
        "description": "A point on the map.",
        "properties": {
            "x": {"type": "number", "description": "Longitude in degrees."},
            "y": {"type": "number", "description": "Latitude in degrees."},
            "label": {"type": "string", "default": "here"},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "free-form tags"},
        },
        "required": ["x", "y"],
        "additionalProperties": False,
    }


def test_dataclass_without_docstring_gets_no_generated_description():
    def f(r: Route): ...

    route = props(f)["r"]
    assert "description" not in route  # not the "Route(start: ...)" text dataclass() generates
    assert route["properties"]["stops"]["items"]["required"] == ["x", "y"]


def test_nested_dataclass_input_arrives_as_instances():
    @tool
    def plan(route: Route) -> str:
        return f"{type(route.start).__name__} {route.start.x} {[type(s).__name__ for s in route.stops]}"

    content, is_error = plan.invoke({"route": {"start": {"x": 1, "y": 2}, "stops": [{"x": 3, "y": 4}]}})
    assert (content, is_error) == ("Point 1 ['Point']", False)


def test_recursive_dataclass_is_refused_clearly():
    @dataclasses.dataclass
    class Node:
        children: "List[Node]"

    Node.__annotations__["children"] = List[Node]  # a local class: resolve the forward reference by hand

    def f(tree: Node): ...

    with pytest.raises(TypeError, match="recursive"):
        function_schema(f)


@pytest.mark.skipif(not hasattr(typing, "NotRequired"), reason="typing.NotRequired needs Python 3.11")
def test_typeddict_required_and_not_required_qualifiers():
    ns: Dict[str, Any] = {}
    exec(
        "from typing import TypedDict, NotRequired, Required, Annotated\n"
        "class Opts(TypedDict):\n"
        "    mode: str\n"
        "    depth: NotRequired[Annotated[int, 'how deep']]\n"
        "class Loose(TypedDict, total=False):\n"
        "    key: Required[str]\n"
        "    hint: str\n"
        "def f(o: Opts, l: Loose): ...\n",
        ns,
    )
    p = props(ns["f"])
    assert p["o"]["required"] == ["mode"]
    assert p["o"]["properties"]["depth"] == {"type": "integer", "description": "how deep"}
    assert p["l"]["required"] == ["key"]
    assert p["l"]["properties"]["hint"] == {"type": "string"}


def test_string_annotations_from_future_import_resolve():
    ns: Dict[str, Any] = {}
    exec(
        "from __future__ import annotations\n"
        "from typing import List, Optional\n"
        "import enum\n"
        "class Mode(enum.Enum):\n"
        "    FAST = 'fast'\n"
        "def f(a: Optional[int] = None, b: List[str] = [], m: Mode = Mode.FAST): ...\n",
        ns,
    )
    p = props(ns["f"])
    assert p["a"] == {"type": ["integer", "null"], "default": None}
    assert p["b"] == {"type": "array", "items": {"type": "string"}, "default": []}
    assert p["m"] == {"type": "string", "enum": ["fast"], "default": "fast"}


# ------------------------------------------------------------------------------------------------ defaults, skipping


def test_defaults_are_not_required_and_recorded():
    def f(a: str, b: int = 5, c: List[str] = ["x"], d: Tuple[int, int] = (1, 2)): ...  # noqa: B006

    s = function_schema(f)
    assert s["required"] == ["a"]
    assert s["properties"]["b"]["default"] == 5
    assert s["properties"]["c"]["default"] == ["x"]
    assert s["properties"]["d"]["default"] == [1, 2]


def test_non_json_default_is_left_out_of_the_schema():
    sentinel = object()

    def f(a: Any = sentinel, b: float = float("nan")): ...

    s = function_schema(f)
    assert s["required"] == []
    assert "default" not in s["properties"]["a"]
    assert "default" not in s["properties"]["b"]


def test_self_cls_and_var_positional_are_skipped_and_kwargs_open_the_schema():
    class K:
        def m(self, a: int, *rest: str) -> None: ...

    def g(a: int, **extra: str): ...

    s = function_schema(K.m)
    assert list(s["properties"]) == ["a"]
    assert s["additionalProperties"] is False
    sg = function_schema(g)
    assert list(sg["properties"]) == ["a"]
    assert sg["additionalProperties"] == {"type": "string"}


def test_schema_always_has_the_object_keys():
    def f(): ...

    assert function_schema(f) == {"type": "object", "properties": {}, "required": [], "additionalProperties": False}


# ------------------------------------------------------------------------------------------------ unmappable hints


class Opaque:
    pass


@pytest.mark.parametrize(
    "annotation, shown",
    [
        (Opaque, ["Opaque"]),
        (Set[Opaque], ["Set[", "Opaque"]),
        (Callable[[int], int], ["Callable"]),
        (bytes, ["bytes"]),
    ],
)
def test_unmappable_hint_raises_type_error_naming_function_parameter_and_hint(annotation, shown):
    def lookup(query: str, widget=None): ...

    lookup.__annotations__["widget"] = annotation
    with pytest.raises(TypeError) as e:
        function_schema(lookup)
    msg = str(e.value)
    print(msg)
    assert "'lookup'" in msg and "'widget'" in msg
    for part in shown:
        assert part in msg


def test_unmappable_field_inside_a_dataclass_names_the_field():
    @dataclasses.dataclass
    class Job:
        run: Callable[[], None]

    def submit(job: Job): ...

    with pytest.raises(TypeError) as e:
        function_schema(submit)
    assert "'submit'" in str(e.value) and "'job'" in str(e.value) and "'run'" in str(e.value)


def test_unresolvable_forward_reference_names_the_parameter():
    def f(a: int, b: "DoesNotExist"): ...  # noqa: F821

    with pytest.raises(TypeError) as e:
        function_schema(f)
    assert "'b'" in str(e.value) and "DoesNotExist" in str(e.value)


def test_tool_decorator_raises_at_registration_for_unmappable_hint():
    with pytest.raises(TypeError, match="'cb'"):

        @tool
        def f(cb: Callable[[], None]): ...


# ------------------------------------------------------------------------------------------------ docstrings


def test_google_docstring_gives_description_and_multiline_parameter_docs():
    def weather(city: str, days: int = 1, unit: str = "c"):
        """Get the weather forecast.

        Uses the public forecast service and
        caches nothing.

        Args:
            city (str): The city to look up,
                for example "Paris".
            days: How many days
                to forecast.
            unit (str, optional): "c" or "f".

        Returns:
            The forecast as text.

        Raises:
            ValueError: when the city is unknown.
        """

    t = tool(weather)
    assert t.description == "Get the weather forecast.\n\nUses the public forecast service and\ncaches nothing."
    p = t.input_schema["properties"]
    assert p["city"]["description"] == 'The city to look up, for example "Paris".'
    assert p["days"]["description"] == "How many days to forecast."
    assert p["unit"]["description"] == '"c" or "f".'
    assert "Returns" not in t.description and "Raises" not in t.description and "ValueError" not in t.description


def test_returns_and_raises_sections_are_left_out_of_the_description_without_args():
    def f():
        """Fetch the thing.

        Returns:
            the thing.

        Raises:
            KeyError: if missing.
        """

    assert tool(f).description == "Fetch the thing."


def test_description_keeps_a_colon_line_that_is_not_a_section():
    def f():
        """Convert units.

        Supported units:
            c, f, k
        """

    assert tool(f).description == "Convert units.\n\nSupported units:\n    c, f, k"


@pytest.mark.parametrize("header", ["Arguments:", "Parameters:"])
def test_arguments_and_parameters_headers_are_accepted(header):
    def f(a: int):
        pass

    f.__doc__ = f"""Do it.

    {header}
        a: the a.
    """
    assert tool(f).input_schema["properties"]["a"]["description"] == "the a."
    assert tool(f).description == "Do it."


def test_numpy_and_sphinx_parameter_docs_are_read_too():
    def np_style(a: int):
        """Numpy style.

        Parameters
        ----------
        a : int
            The a value.
        """

    def sphinx_style(a: int):
        """Sphinx style.

        :param a: The a value.
        :returns: nothing
        """

    for f, desc in ((np_style, "Numpy style."), (sphinx_style, "Sphinx style.")):
        t = tool(f)
        assert t.description == desc
        assert t.input_schema["properties"]["a"]["description"] == "The a value."


def test_function_without_docstring_has_empty_description():
    @tool
    def f(a: int): ...

    assert f.description == ""


# ------------------------------------------------------------------------------------------------ invoke()


def test_invoke_returns_str_result_as_is():
    @tool
    def greet(name: str) -> str:
        return f"hello {name}"

    assert greet.invoke({"name": "Ada"}) == ("hello Ada", False)


def test_invoke_returns_dict_result_as_json_text():
    @tool
    def info() -> dict:
        return {"a": 1, "b": [True, None], "é": "ü"}

    content, is_error = info.invoke({})
    assert not is_error and isinstance(content, str)
    assert json.loads(content) == {"a": 1, "b": [True, None], "é": "ü"}


def test_invoke_converts_non_json_values_datetime_dataclass_and_model_dump():
    class ModelLike:
        def model_dump(self, mode: str = "python") -> dict:
            return {"mode": mode}

    @tool
    def info() -> dict:
        return {
            "when": datetime.datetime(2024, 5, 1, 12, 0),
            "point": Point(1.0, 2.0),
            "model": ModelLike(),
            "color": Color.RED,
            "other": Opaque,
        }

    content, is_error = info.invoke({})
    assert not is_error
    data = json.loads(content)
    assert data["when"] == "2024-05-01T12:00:00"
    assert data["point"] == {"x": 1.0, "y": 2.0, "label": "here", "tags": []}
    assert data["model"] == {"mode": "json"}
    assert data["color"] == "red"
    assert "Opaque" in data["other"]  # default=str


def test_invoke_numbers_and_lists_of_non_blocks_become_json():
    @tool
    def n() -> int:
        return 42

    @tool
    def lst() -> list:
        return [1, {"no_type": True}]

    assert n.invoke({}) == ("42", False)
    assert lst.invoke({}) == ('[1, {"no_type": true}]', False)


def test_invoke_passes_list_of_content_blocks_through():
    blocks = [
        {"type": "text", "text": "see image"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
    ]

    @tool
    def shot() -> list:
        return blocks

    content, is_error = shot.invoke({})
    assert not is_error
    assert content == blocks and isinstance(content, list)


def test_invoke_none_result_is_empty_text():
    @tool
    def nothing() -> None:
        return None

    assert nothing.invoke({}) == ("", False)


def test_invoke_str_subclass_result_is_a_plain_str():
    class Mood(str, enum.Enum):
        HAPPY = "happy"

    @tool
    def mood() -> str:
        return Mood.HAPPY

    content, _ = mood.invoke({})
    assert content == "happy" and type(content) is str


def test_invoke_exception_is_error_result_and_logged_with_traceback(caplog):
    @tool
    def boom(x: int) -> str:
        raise ValueError(f"bad x {x}")

    with caplog.at_level(logging.ERROR, logger="tooloop"):
        content, is_error = boom.invoke({"x": 7})
    assert (content, is_error) == ("ValueError: bad x 7", True)
    records = [r for r in caplog.records if r.name == "tooloop"]
    assert len(records) == 1
    assert records[0].levelno == logging.ERROR
    assert "boom" in records[0].getMessage()
    assert records[0].exc_info is not None and records[0].exc_info[0] is ValueError
    assert "Traceback" in caplog.text


def test_invoke_exception_without_message_shows_its_type():
    @tool
    def boom() -> str:
        raise KeyError()

    assert boom.invoke({}) == ("KeyError", True)


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit, GeneratorExit])
def test_invoke_base_exception_propagates_unchanged(exc):
    raised = exc()

    @tool
    def stop() -> str:
        raise raised

    with pytest.raises(exc) as e:
        stop.invoke({})
    assert e.value is raised


def test_invoke_unknown_input_key_is_error_naming_it(caplog):
    calls = []

    @tool
    def f(a: int) -> str:
        calls.append(a)
        return "ran"

    with caplog.at_level(logging.DEBUG, logger="tooloop"):
        content, is_error = f.invoke({"a": 1, "bogus": 2})
    assert is_error
    assert content == "unknown parameter(s) for tool 'f': 'bogus' (accepted parameters: a)"
    assert calls == []  # the tool did not run
    assert caplog.records == []  # the model's mistake, not a tool failure: nothing to log


def test_invoke_unknown_key_is_accepted_when_fn_takes_kwargs():
    @tool
    def f(a: int, **extra: Any) -> dict:
        return {"a": a, "extra": extra}

    assert f.invoke({"a": 1, "b": 2}) == ('{"a": 1, "extra": {"b": 2}}', False)


def test_invoke_missing_required_parameter_is_error():
    @tool
    def f(a: int, b: int = 0) -> int:
        return a + b

    content, is_error = f.invoke({"b": 1})
    assert is_error and "'a'" in content


def test_invoke_non_dict_input_is_error():
    @tool
    def f(a: int = 0) -> int:
        return a

    content, is_error = f.invoke(["not", "a", "dict"])  # type: ignore[arg-type]
    assert is_error and "JSON object" in content
    assert f.invoke(None) == ("0", False)


def test_invoke_unconvertible_result_is_error_not_crash(caplog):
    @tool
    def f() -> dict:
        return {(1, 2): "tuple keys are not JSON"}

    with caplog.at_level(logging.ERROR, logger="tooloop"):
        content, is_error = f.invoke({})
    assert is_error and "dict" in content


def test_invoke_positional_only_parameters_are_passed_positionally():
    ns: Dict[str, Any] = {}
    exec("def f(a: int, /, b: int = 0) -> int:\n    return a * 10 + b", ns)
    t = tool(ns["f"])
    assert t.invoke({"a": 4, "b": 2}) == ("42", False)


def test_invoke_runs_async_tool_to_completion():
    @tool
    async def slow(x: int) -> str:
        return f"got {x}"

    assert slow.invoke({"x": 3}) == ("got 3", False)


def test_invoke_explicit_tool_calls_fn_with_keywords():
    t = Tool("adder", "Adds.", {"properties": {"a": {"type": "integer"}}}, lambda a, b=1: a + b)
    assert t.invoke({"a": 2}) == ("3", False)


# --------------------------------------------------------------------------------------------- Tool / @tool / as_tool


@pytest.mark.parametrize("name", ["get_time", "a", "A-1_b", "x" * 64])
def test_valid_tool_names_are_accepted(name):
    assert Tool(name, "", {"type": "object"}, lambda: None).name == name


@pytest.mark.parametrize("name", ["", "has space", "dot.name", "x" * 65, "ünï", "trailing\n"])
def test_invalid_tool_names_raise_value_error(name):
    with pytest.raises(ValueError, match="invalid tool name"):
        Tool(name, "", {"type": "object"}, lambda: None)


def test_tool_constructor_validates_its_arguments():
    with pytest.raises(TypeError, match="name must be a str"):
        Tool(123, "", {}, lambda: None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="input_schema must be a dict"):
        Tool("t", "", "{}", lambda: None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='"type": "object"'):
        Tool("t", "", {"type": "array"}, lambda: None)
    with pytest.raises(ValueError, match="not JSON-serializable"):
        Tool("t", "", {"type": "object", "default": object()}, lambda: None)
    with pytest.raises(TypeError, match="fn must be callable"):
        Tool("t", "", {}, "not callable")  # type: ignore[arg-type]


def test_tool_adds_missing_object_type_without_touching_callers_dict():
    schema: Dict[str, Any] = {"properties": {}}
    t = Tool("t", "d", schema, lambda: None, parallel_safe=True)
    assert t.input_schema["type"] == "object"
    assert "type" not in schema
    assert t.to_spec() == {"name": "t", "description": "d", "input_schema": {"properties": {}, "type": "object"}}
    assert t.parallel_safe is True


def test_bare_tool_decorator_keeps_the_function_callable():
    @tool
    def add(a: int, b: int = 1) -> int:
        """Add numbers."""
        return a + b

    assert isinstance(add, Tool)
    assert add.name == "add" and add.description == "Add numbers." and add.parallel_safe is False
    assert add(2, b=3) == 5
    assert add.to_spec()["input_schema"]["required"] == ["a"]


def test_tool_decorator_with_arguments_overrides_name_description_parallel_safe():
    @tool(name="renamed", description="Custom.", parallel_safe=True)
    def f(a: int) -> int:
        """Docstring loses."""
        return a

    assert (f.name, f.description, f.parallel_safe) == ("renamed", "Custom.", True)
    assert f(4) == 4


def test_tool_decorator_rejects_lambda_without_name_and_a_string_argument():
    with pytest.raises(ValueError, match="lambda"):
        tool(lambda x: x)
    assert tool(lambda x: x, name="ident").name == "ident"
    with pytest.raises(TypeError, match="@tool\\(name='x'\\)"):
        tool("x")  # type: ignore[arg-type]


def test_tool_on_a_method_binds_to_the_instance():
    class Counter:
        def __init__(self) -> None:
            self.n = 10

        @tool
        def add(self, k: int) -> int:
            """Add k."""
            return self.n + k

    c = Counter()
    assert "self" not in Counter.add.input_schema["properties"]
    assert c.add.invoke({"k": 5}) == ("15", False)
    assert c.add(1) == 11


def test_as_tool_returns_tool_itself():
    t = Tool("t", "", {}, lambda: None)
    assert as_tool(t) is t


def test_as_tool_wraps_a_function_and_a_callable_instance():
    def lookup(q: str) -> str:
        """Look up."""
        return q.upper()

    class Searcher:
        def __call__(self, q: str) -> str:
            """Search."""
            return q[::-1]

    t = as_tool(lookup)
    assert isinstance(t, Tool) and t.name == "lookup" and t.invoke({"q": "ab"}) == ("AB", False)
    s = as_tool(Searcher())
    assert s.name == "Searcher" and s.description == "Search."
    assert s.input_schema["properties"] == {"q": {"type": "string"}}
    assert s.invoke({"q": "ab"}) == ("ba", False)


@pytest.mark.parametrize("garbage", [42, "get_time", None, {"name": "x"}, int])
def test_as_tool_rejects_garbage_naming_the_object(garbage):
    with pytest.raises(TypeError) as e:
        as_tool(garbage)
    assert repr(garbage) in str(e.value) or getattr(garbage, "__qualname__", "?") in str(e.value)


def test_function_schema_of_a_tool_is_its_input_schema():
    t = Tool("t", "", {"type": "object", "properties": {"z": {}}}, lambda z: z)
    assert function_schema(t) == t.input_schema


# ------------------------------------------------------------------------------------------------ pydantic (optional)


def test_pydantic_model_parameter_uses_its_schema_and_arrives_validated():
    pydantic = pytest.importorskip("pydantic")
    if not hasattr(pydantic.BaseModel, "model_json_schema"):
        pytest.skip("pydantic v2 needed")

    class Inner(pydantic.BaseModel):
        v: int

    class Query(pydantic.BaseModel):
        text: str
        inner: Inner

    @tool
    def search(q: Query) -> str:
        return f"{type(q).__name__} {q.text} {q.inner.v}"

    s = search.input_schema
    assert s["properties"]["q"]["properties"]["text"]["type"] == "string"
    assert "Inner" in s["$defs"]  # hoisted so "#/$defs/Inner" resolves from the tool schema's root
    assert search.invoke({"q": {"text": "hi", "inner": {"v": 2}}}) == ("Query hi 2", False)
    content, is_error = search.invoke({"q": {"text": "hi", "inner": {"v": "nope"}}})
    assert is_error and "q" in content

