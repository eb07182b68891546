"""JSON schemas from type hints, and the converters that turn a tool's JSON input back into the annotated
types (Enum, dataclass, datetime, ...).

Loaded when the first tool is built from a function (``@tool``, ``Agent(tools=[f])``), never at
``import tooloop``: ``inspect``, ``dataclasses`` and ``typing`` introspection cost more than the rest of the
package's import together. It must never guess: a hint with no JSON mapping is a ``TypeError`` naming the
function, the parameter and the hint.


Schema choices (documented here once, tested in tests/python/test_schema.py):

* ``Optional[X]`` / ``X | None`` makes X's schema nullable by adding ``"null"`` to its ``"type"`` (and ``None``
  to its ``"enum"``, if any): ``{"type": ["string", "null"]}``. Only a schema without a single ``"type"`` (a
  union of object types) gets ``{"anyOf": [..., {"type": "null"}]}``. The core's input validator understands
  type lists and enums, so this form is checked before the tool runs.
* Required-ness follows the signature only: a parameter is required iff it has no default, whether or not it
  is Optional (``x: Optional[str]`` without default is required and may be null). A ``None`` default makes the
  schema nullable even without Optional (``x: str = None``), since null then means "the default".
* ``Any``, ``object`` and a missing annotation give ``{}``: any JSON value.
* A default is recorded as ``"default"`` when it is JSON-serializable (an Enum default records its value).
* ``**kwargs: X`` turns ``"additionalProperties"`` into X's schema (``true`` when unannotated); without
  ``**kwargs`` it is ``false``, as for every nested TypedDict or dataclass object.
* ``typing.Annotated[X, "text"]`` (or metadata with a string ``.description``) sets the description; a dict in
  the metadata is merged into the schema as raw JSON schema (e.g. ``{"minimum": 0}``).

"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import datetime
import enum
import functools
import inspect
import json
import pathlib
import re
import sys
import types
import typing
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

from ._docstring import parse_docstring as _parse_docstring

__all__ = ["build_schema", "Built"]

_UnionType = getattr(types, "UnionType", None)  # X | Y, Python >= 3.10



class _Unmappable(Exception):
    """A hint (or a part of one) with no JSON schema; the message says which part and why."""


@dataclasses.dataclass
class _Built:
    name: str
    description: str
    schema: Dict[str, Any]
    converters: Dict[str, Callable[[Any], Any]]


class _Ctx:
    """State of one schema build: the types being expanded (to refuse recursive ones) and pydantic $defs."""

    def __init__(self) -> None:
        self.expanding: List[Any] = []
        self.defs: Dict[str, Any] = {}


_SKIP = object()


def _hint_target(fn: Any) -> Any:
    """The object whose annotations and docstring describe ``fn`` (partials, wrappers, callable instances)."""
    target = fn
    for _ in range(32):
        if isinstance(target, functools.partial):
            target = target.func
        elif isinstance(target, (staticmethod, classmethod)):
            target = target.__func__
        else:
            break
    try:
        target = inspect.unwrap(target)
    except ValueError:
        pass
    if inspect.ismethod(target):
        target = target.__func__
    if not (inspect.isfunction(target) or inspect.isbuiltin(target)) and not isinstance(target, type):
        if callable(target):
            target = type(target).__call__  # a callable instance: its __call__ holds the hints
    return target


def _callable_name(fn: Any) -> str:
    target = fn
    while isinstance(target, functools.partial):
        target = target.func
    name = getattr(target, "__name__", None)
    if isinstance(name, str):
        return name
    return type(target).__name__


def _resolve_hints(fn: Any, target: Any, params: List[inspect.Parameter], fname: str) -> Dict[str, Any]:
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception:
        pass
    # Find the parameter whose hint does not resolve, to name it in the error.
    raw = getattr(target, "__annotations__", {}) or {}
    globalns = getattr(target, "__globals__", {})
    hints: Dict[str, Any] = {}
    for p in params:
        if p.name not in raw:
            continue
        probe = types.FunctionType((lambda: None).__code__, globalns)
        probe.__annotations__ = {p.name: raw[p.name]}
        try:
            hints.update(typing.get_type_hints(probe, include_extras=True))
        except Exception as e:
            raise TypeError(
                f"tool function {fname!r}: cannot resolve the type hint {raw[p.name]!r} of parameter {p.name!r} "
                f"({type(e).__name__}: {e}); define the type at module level or import it where the function is"
            ) from None
    return hints


def _build_schema(fn: Callable[..., Any]) -> _Built:
    fname = _callable_name(fn)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as e:
        raise TypeError(f"cannot build a tool schema for {fname!r}: no signature ({e})") from None
    target = _hint_target(fn)

    params = list(sig.parameters.values())
    if params and params[0].name in ("self", "cls") and params[0].kind in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        params = params[1:]
    var_kw = next((p for p in params if p.kind is inspect.Parameter.VAR_KEYWORD), None)
    params = [p for p in params if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]

    hints = _resolve_hints(fn, target, params + ([var_kw] if var_kw else []), fname)
    doc = inspect.getdoc(target) or ""
    if not doc and not inspect.isfunction(target):
        doc = inspect.getdoc(fn) or ""
    description, param_docs = _parse_docstring(doc)

    ctx = _Ctx()
    properties: Dict[str, Any] = {}
    required: List[str] = []
    converters: Dict[str, Callable[[Any], Any]] = {}
    for p in params:
        hint = hints.get(p.name, Any) if p.annotation is not p.empty else Any
        try:
            prop = _schema_for(hint, ctx)
            conv = _converter_for(hint)
        except _Unmappable as e:
            raise TypeError(
                f"tool function {fname!r}: parameter {p.name!r} has the type hint {_hint_name(hint)}, which has "
                f"no JSON schema mapping ({e}). Use str, int, float, bool, list, dict, Literal, an Enum, a "
                "TypedDict, a dataclass or Any, or give an explicit input_schema with tooloop.Tool(...)"
            ) from None
        if "description" not in prop and p.name in param_docs:
            prop["description"] = param_docs[p.name]
        if p.default is p.empty:
            required.append(p.name)
        else:
            if p.default is None:
                prop = _nullable(prop)  # `x: str = None`: null means "the default", so the model may send it
            _record_default(prop, p.default)
        properties[p.name] = prop
        if conv is not None:
            converters[p.name] = conv

    additional: Any = False
    if var_kw is not None:
        kw_hint = hints.get(var_kw.name, Any)
        try:
            kw_schema = _schema_for(kw_hint, ctx)
        except _Unmappable as e:
            raise TypeError(
                f"tool function {fname!r}: **{var_kw.name} has the type hint {_hint_name(kw_hint)}, which has no "
                f"JSON schema mapping ({e})"
            ) from None
        additional = kw_schema if kw_schema else True

    schema: Dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": additional,
    }
    if ctx.defs:
        schema["$defs"] = ctx.defs
    return _Built(fname, description, schema, converters)


def _record_default(schema: Dict[str, Any], default: Any) -> None:
    value = default.value if isinstance(default, enum.Enum) else default
    try:
        schema["default"] = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        pass  # not JSON (a sentinel object, a dataclass instance, ...): the schema just omits it


def _hint_name(hint: Any) -> str:
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__qualname__
    text = repr(hint)
    return re.sub(r"\btyping(_extensions)?\.", "", text)


def _is_form(obj: Any, name: str) -> bool:
    """Whether ``obj`` is the special form ``typing.<name>`` (or typing_extensions', which may differ)."""
    if obj is None:
        return False
    if obj is getattr(typing, name, _SKIP):
        return True
    te = sys.modules.get("typing_extensions")
    return te is not None and obj is getattr(te, name, _SKIP)


def _is_union(origin: Any) -> bool:
    return _is_form(origin, "Union") or (_UnionType is not None and origin is _UnionType)


def _is_typeddict(tp: Any) -> bool:
    return (
        isinstance(tp, type)
        and issubclass(tp, dict)
        and hasattr(tp, "__required_keys__")
        and hasattr(tp, "__total__")
    )


def _is_pydantic_model(tp: Any) -> bool:
    return isinstance(tp, type) and callable(getattr(tp, "model_json_schema", None)) and callable(
        getattr(tp, "model_validate", None)
    )


def _strip_annotated(hint: Any) -> Tuple[Any, List[Any]]:
    metadata: List[Any] = []
    while hasattr(hint, "__metadata__") and hasattr(hint, "__origin__"):
        metadata.extend(hint.__metadata__)
        hint = hint.__origin__
    return hint, metadata


def _strip_qualifiers(hint: Any) -> Any:
    """Required[X], NotRequired[X], ReadOnly[X] (TypedDict keys) and Final/ClassVar → X."""
    while True:
        origin = typing.get_origin(hint)
        if any(_is_form(origin, n) for n in ("Required", "NotRequired", "ReadOnly", "Final", "ClassVar")):
            args = typing.get_args(hint)
            hint = args[0] if args else Any
        else:
            return hint


def _metadata_description(metadata: List[Any]) -> Optional[str]:
    for m in metadata:
        if isinstance(m, str):
            return m
        d = getattr(m, "description", None)
        if isinstance(d, str):
            return d
    return None


def _json_type_of(value: Any) -> Optional[str]:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return None


def _enum_schema(values: List[Any], what: str) -> Dict[str, Any]:
    for v in values:
        if _json_type_of(v) is None:
            raise _Unmappable(f"{what} has the value {v!r}, which is not a JSON string, number, boolean or null")
    kinds = {_json_type_of(v) for v in values if v is not None}
    schema: Dict[str, Any]
    if kinds == {"integer", "number"}:
        kinds = {"number"}
    if len(kinds) == 1:
        schema = {"type": kinds.pop(), "enum": list(values)}
        if None in values:
            schema["type"] = [schema["type"], "null"]
    else:
        schema = {"enum": list(values)}  # mixed kinds: the enum alone says it all
    return schema


def _nullable(schema: Dict[str, Any]) -> Dict[str, Any]:
    if not schema or set(schema) <= {"description", "default", "title", "examples"}:
        return schema  # already accepts anything, null included
    s = dict(schema)
    t = s.get("type")
    if isinstance(t, str):
        if t != "null":
            s["type"] = [t, "null"]
    elif isinstance(t, list):
        if "null" not in t:
            s["type"] = t + ["null"]
    elif "enum" in s:
        pass
    elif "anyOf" in s:
        if {"type": "null"} not in s["anyOf"]:
            s["anyOf"] = s["anyOf"] + [{"type": "null"}]
        return s
    else:
        return {"anyOf": [s, {"type": "null"}]}
    if "enum" in s and None not in s["enum"]:
        s["enum"] = s["enum"] + [None]
    return s


def _union_schema(members: List[Any], ctx: _Ctx) -> Dict[str, Any]:
    has_none = any(m is type(None) or m is None for m in members)
    rest = [m for m in members if not (m is type(None) or m is None)]
    if not rest:
        return {"type": "null"}
    schemas = [_schema_for(m, ctx) for m in rest]
    if any(s == {} for s in schemas):
        return {}  # one member accepts anything: so does the union
    if len(schemas) == 1:
        result = schemas[0]
    elif all(set(s) == {"type"} and isinstance(s["type"], str) for s in schemas):
        merged: List[str] = []
        for s in schemas:
            if s["type"] not in merged:
                merged.append(s["type"])
        if "integer" in merged and "number" in merged:
            merged.remove("integer")
        result = {"type": merged[0]} if len(merged) == 1 else {"type": merged}
    else:
        result = {"anyOf": schemas}
    return _nullable(result) if has_none else result


def _class_docs(cls: type) -> Tuple[str, Dict[str, str]]:
    doc = cls.__doc__ or ""
    if dataclasses.is_dataclass(cls) and doc.startswith(cls.__name__ + "("):
        doc = ""  # the signature dataclass() writes when the class has no docstring
    return _parse_docstring(inspect.cleandoc(doc)) if doc else ("", {})


def _object_schema(
    cls: type,
    fields: List[Tuple[str, Any, bool, Any, Optional[str]]],
    ctx: _Ctx,
) -> Dict[str, Any]:
    """fields: (name, hint, required, default or _SKIP, description from field metadata)."""
    description, field_docs = _class_docs(cls)
    properties: Dict[str, Any] = {}
    required: List[str] = []
    for fname, hint, is_required, default, meta_doc in fields:
        try:
            s = _schema_for(hint, ctx)
        except _Unmappable as e:
            raise _Unmappable(f"field {fname!r} of {cls.__qualname__}: {e}") from None
        doc = meta_doc or field_docs.get(fname)
        if doc and "description" not in s:
            s["description"] = doc
        if is_required:
            required.append(fname)
        elif default is not _SKIP:
            if default is None:
                s = _nullable(s)
            _record_default(s, default)
        properties[fname] = s
    schema: Dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    if description:
        schema["description"] = description
    return schema


def _class_hints(cls: type) -> Dict[str, Any]:
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception as e:
        raise _Unmappable(f"cannot resolve the type hints of {cls.__qualname__} ({type(e).__name__}: {e})") from None


def _schema_for(hint: Any, ctx: _Ctx) -> Dict[str, Any]:
    hint = _strip_qualifiers(hint)
    if hasattr(hint, "__metadata__") and hasattr(hint, "__origin__"):
        inner, metadata = _strip_annotated(hint)
        schema = dict(_schema_for(inner, ctx))
        for m in metadata:
            if isinstance(m, dict):
                schema.update(copy.deepcopy(m))
        text = _metadata_description(metadata)
        if text is not None:
            schema["description"] = text
        return schema

    if hint is Any or hint is object or hint is inspect.Parameter.empty:
        return {}
    if hint is None or hint is type(None):
        return {"type": "null"}
    supertype = getattr(hint, "__supertype__", None)  # typing.NewType
    if supertype is not None:
        return _schema_for(supertype, ctx)
    if isinstance(hint, str) or isinstance(hint, typing.ForwardRef):
        raise _Unmappable(f"the forward reference {hint!r} is not resolved")
    if isinstance(hint, typing.TypeVar):
        raise _Unmappable("a TypeVar has no fixed JSON type")

    origin = typing.get_origin(hint)
    args = typing.get_args(hint)

    if _is_union(origin):
        return _union_schema(list(args), ctx)
    if _is_form(origin, "Literal"):
        values = [a.value if isinstance(a, enum.Enum) else a for a in args]
        return _enum_schema(values, f"Literal{list(args)!r}")

    if origin is not None:
        if origin in (list, collections.abc.Sequence, collections.abc.MutableSequence, collections.abc.Iterable,
                      collections.abc.Collection):
            schema = {"type": "array"}
            if args:
                schema["items"] = _item_schema(args[0], ctx, "element")
            return schema
        if origin in (set, frozenset, collections.abc.Set, collections.abc.MutableSet):
            schema = {"type": "array", "uniqueItems": True}
            if args:
                schema["items"] = _item_schema(args[0], ctx, "element")
            return schema
        if origin is tuple:
            if not args or args == ((),):  # bare Tuple; Tuple[()] (whose args are () from 3.11 on) too
                return {"type": "array"}
            if len(args) == 2 and args[1] is Ellipsis:
                return {"type": "array", "items": _item_schema(args[0], ctx, "element")}
            items = [_item_schema(a, ctx, f"element {i}") for i, a in enumerate(args)]
            return {"type": "array", "prefixItems": items, "minItems": len(items), "maxItems": len(items)}
        if origin in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
            schema = {"type": "object"}
            if args:
                key = _strip_annotated(args[0])[0]
                if key not in (str, Any):
                    raise _Unmappable(f"dict keys must be str (JSON object keys are strings), got {_hint_name(key)}")
                schema["additionalProperties"] = _item_schema(args[1], ctx, "value")
            return schema
        raise _Unmappable(f"{_hint_name(origin)} is not a JSON type")

    if not isinstance(hint, type):
        raise _Unmappable(f"{hint!r} is not a type")

    if issubclass(hint, enum.Enum):  # before int/str: IntEnum and str-mixin enums are subclasses of those
        return _enum_schema([m.value for m in hint], f"the Enum {hint.__qualname__}")
    if issubclass(hint, bool):  # before int: bool is an int
        return {"type": "boolean"}
    if issubclass(hint, int):
        return {"type": "integer"}
    if issubclass(hint, float):
        return {"type": "number"}
    if issubclass(hint, str):
        return {"type": "string"}
    if issubclass(hint, datetime.datetime):  # before date: datetime is a date
        return {"type": "string", "format": "date-time"}
    if issubclass(hint, datetime.date):
        return {"type": "string", "format": "date"}
    if issubclass(hint, datetime.time):
        return {"type": "string", "format": "time"}
    if issubclass(hint, uuid.UUID):
        return {"type": "string", "format": "uuid"}
    if issubclass(hint, pathlib.PurePath):
        return {"type": "string"}
    if hint in (list, tuple, collections.abc.Sequence, collections.abc.MutableSequence):
        return {"type": "array"}
    if hint in (set, frozenset):
        return {"type": "array", "uniqueItems": True}
    if hint in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
        return {"type": "object"}

    if _is_typeddict(hint) or dataclasses.is_dataclass(hint) or _is_pydantic_model(hint):
        if hint in ctx.expanding:
            raise _Unmappable(f"{hint.__qualname__} refers to itself; recursive types are not supported")
        ctx.expanding.append(hint)
        try:
            return _structured_schema(hint, ctx)
        finally:
            ctx.expanding.pop()

    raise _Unmappable(f"{hint.__qualname__} is not a JSON type")


def _item_schema(hint: Any, ctx: _Ctx, what: str) -> Dict[str, Any]:
    try:
        return _schema_for(hint, ctx)
    except _Unmappable as e:
        raise _Unmappable(f"{what} type {_hint_name(hint)}: {e}") from None


def _structured_schema(cls: type, ctx: _Ctx) -> Dict[str, Any]:
    if _is_pydantic_model(cls):
        return _pydantic_schema(cls, ctx)
    hints = _class_hints(cls)
    fields: List[Tuple[str, Any, bool, Any, Optional[str]]] = []
    if _is_typeddict(cls):
        required_keys: typing.AbstractSet[str] = getattr(cls, "__required_keys__", frozenset())
        for key, hint in hints.items():
            fields.append((key, hint, key in required_keys, _SKIP, None))
    else:
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            default = f.default if f.default is not dataclasses.MISSING else _SKIP
            meta_doc = f.metadata.get("description") if f.metadata else None
            fields.append((f.name, hints.get(f.name, Any), not has_default, default,
                           meta_doc if isinstance(meta_doc, str) else None))
    return _object_schema(cls, fields, ctx)


def _pydantic_schema(cls: type, ctx: _Ctx) -> Dict[str, Any]:
    try:
        schema = cls.model_json_schema()  # type: ignore[attr-defined]
    except Exception as e:
        raise _Unmappable(f"{cls.__qualname__}.model_json_schema() failed ({type(e).__name__}: {e})") from None
    schema = dict(schema)
    # $ref paths point at the document root, so nested models' $defs move to the tool schema's top level.
    for name, sub in schema.pop("$defs", {}).items():
        if name in ctx.defs and ctx.defs[name] != sub:
            raise _Unmappable(f"two different models named {name!r} in one tool schema")
        ctx.defs[name] = sub
    return schema


# ---------------------------------------------------------------------------------------------------------------
# Input conversion: JSON values back into the annotated types
# ---------------------------------------------------------------------------------------------------------------


def _parse_datetime(value: Any) -> datetime.datetime:
    if isinstance(value, datetime.datetime):
        return value
    text = str(value)
    if text.endswith(("Z", "z")):  # fromisoformat accepts "Z" only from Python 3.11 on
        text = text[:-1] + "+00:00"
    return datetime.datetime.fromisoformat(text)


def _converter_for(hint: Any) -> Optional[Callable[[Any], Any]]:
    """A function turning the JSON value of ``hint`` into that type, or None when the JSON value already is."""
    hint = _strip_qualifiers(_strip_annotated(hint)[0])
    supertype = getattr(hint, "__supertype__", None)
    if supertype is not None:
        return _converter_for(supertype)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)

    if _is_union(origin):
        members = [a for a in args if a is not type(None)]
        convs = [c for c in (_converter_for(m) for m in members) if c is not None]
        if not convs:
            return None
        if len(members) == 1:
            only = convs[0]
            return lambda v: None if v is None else only(v)

        def union_conv(v: Any) -> Any:
            if v is None:
                return None
            for c in convs:
                try:
                    return c(v)
                except Exception:
                    continue
            return v  # no member's conversion applies: a member without one (str, int, ...) takes it as is

        return union_conv
    if origin is not None:
        if origin in (list, collections.abc.Sequence, collections.abc.MutableSequence, collections.abc.Iterable,
                      collections.abc.Collection, set, frozenset, collections.abc.Set, collections.abc.MutableSet):
            item = _converter_for(args[0]) if args else None
            make: Callable[[Any], Any] = list
            if origin in (set, collections.abc.Set, collections.abc.MutableSet):
                make = set
            elif origin is frozenset:
                make = frozenset
            if item is None and make is list:
                return None
            return lambda v: make(item(x) for x in v) if item is not None else make(v)
        if origin is tuple:
            if not args or args == ((),):
                return tuple
            if len(args) == 2 and args[1] is Ellipsis:
                item = _converter_for(args[0])
                return lambda v: tuple(item(x) for x in v) if item is not None else tuple(v)
            convs_t = [_converter_for(a) for a in args]

            def tuple_conv(v: Any) -> Any:
                if len(v) != len(convs_t):
                    raise ValueError(f"expected {len(convs_t)} items, got {len(v)}")
                return tuple(c(x) if c is not None else x for c, x in zip(convs_t, v))

            return tuple_conv
        if origin in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
            value_conv = _converter_for(args[1]) if len(args) == 2 else None
            if value_conv is None:
                return None
            return lambda v: {k: value_conv(x) for k, x in v.items()}
        return None

    if not isinstance(hint, type):
        return None
    if issubclass(hint, enum.Enum):
        enum_cls = hint
        return lambda v: v if isinstance(v, enum_cls) else enum_cls(v)
    if issubclass(hint, datetime.datetime):
        return _parse_datetime
    if issubclass(hint, datetime.date):
        return lambda v: v if isinstance(v, datetime.date) else datetime.date.fromisoformat(v)
    if issubclass(hint, datetime.time):
        return lambda v: v if isinstance(v, datetime.time) else datetime.time.fromisoformat(v)
    if issubclass(hint, uuid.UUID):
        return lambda v: v if isinstance(v, uuid.UUID) else uuid.UUID(v)
    if issubclass(hint, pathlib.PurePath):
        path_cls = hint
        return lambda v: v if isinstance(v, path_cls) else path_cls(v)
    if hint is tuple:
        return tuple
    if hint in (set, frozenset):
        return hint
    if _is_pydantic_model(hint):
        model = hint
        return lambda v: v if isinstance(v, model) else model.model_validate(v)  # type: ignore[attr-defined]
    if dataclasses.is_dataclass(hint) or _is_typeddict(hint):
        return _fields_converter(hint)
    return None


def _fields_converter(cls: type) -> Optional[Callable[[Any], Any]]:
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception:
        return None
    convs: Dict[str, Callable[[Any], Any]] = {}
    for key, h in hints.items():
        c = _converter_for(h)
        if c is not None:
            convs[key] = c
    is_dc = dataclasses.is_dataclass(cls)
    if not is_dc and not convs:
        return None

    def conv(v: Any) -> Any:
        if not isinstance(v, dict):
            return v  # already built (a dataclass instance passed by Python code)
        fields = {k: (convs[k](x) if k in convs else x) for k, x in v.items()}
        return cls(**fields) if is_dc else fields

    return conv


def output_schema_for(hint: Any) -> Tuple[Dict[str, Any], Optional[Callable[[Any], Any]]]:
    """The JSON schema of a structured answer's type (a pydantic model, a dataclass, a TypedDict, or any hint a
    tool parameter may have), and the converter that builds the value from the validated JSON (None when the
    JSON value already is one)."""
    ctx = _Ctx()
    try:
        schema = _schema_for(hint, ctx)
    except _Unmappable as e:
        raise TypeError(f"output_schema {_hint_name(hint)} has no JSON schema mapping ({e})") from None
    if ctx.defs:
        schema = dict(schema)
        schema["$defs"] = {**ctx.defs, **schema.get("$defs", {})}
    return schema, _converter_for(hint)


build_schema = _build_schema
Built = _Built
