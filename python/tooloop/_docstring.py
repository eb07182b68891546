"""Docstring parsing for tool descriptions: the summary and body of a docstring, and the text of each
parameter from its Google (``Args:``), numpy (``Parameters`` + rule) or Sphinx (``:param x:``) section.

Pure text processing, loaded only when a tool is built from a function (never at ``import tooloop``). It must
never raise on a malformed docstring: what it cannot read is left out of the description.
"""

from __future__ import annotations

import inspect
import re
from typing import Dict, List, Optional, Tuple

__all__ = ["parse_docstring"]

_PARAM_SECTIONS = {
    "args", "arguments", "parameters", "params", "keyword args", "keyword arguments", "other parameters",
    "kwargs", "attributes", "fields",
}
_OTHER_SECTIONS = {
    "returns", "return", "yields", "yield", "raises", "raise", "exceptions", "except", "examples", "example",
    "notes", "note", "see also", "todo", "warnings", "warning", "warns", "references", "methods",
}
_GOOGLE_HEADER = re.compile(r"^\s*([A-Za-z][A-Za-z ]*?)\s*:\s*$")
_NUMPY_RULE = re.compile(r"^\s*-{3,}\s*$")
_SPHINX_FIELD = re.compile(r"^\s*:(param|parameter|arg|argument|key|keyword|type|returns?|rtype|raises?)\b")
_GOOGLE_ENTRY = re.compile(r"^(\*{0,2}[A-Za-z_]\w*)\s*(?:\(([^)]*)\))?\s*:(?:\s+(.*))?$")
_NUMPY_ENTRY = re.compile(r"^(\*{0,2}[A-Za-z_]\w*(?:\s*,\s*\*{0,2}[A-Za-z_]\w*)*)\s*(?::\s*(.*))?$")
_SPHINX_PARAM = re.compile(
    r"^:(?:param|parameter|arg|argument|key|keyword)\s+(?:[^:]*\s)?(\*{0,2}[A-Za-z_]\w*)\s*:\s*(.*)$"
)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _section_kind(lines: List[str], i: int) -> Optional[Tuple[str, str, int]]:
    """(style, name, header lines) when a section starts at line i, else None."""
    line = lines[i]
    m = _GOOGLE_HEADER.match(line)
    if m and m.group(1).lower() in _PARAM_SECTIONS | _OTHER_SECTIONS:
        return ("google", m.group(1).lower(), 1)
    stripped = line.strip().lower()
    if stripped in _PARAM_SECTIONS | _OTHER_SECTIONS and i + 1 < len(lines) and _NUMPY_RULE.match(lines[i + 1]):
        return ("numpy", stripped, 2)
    if _SPHINX_FIELD.match(line):
        return ("sphinx", "", 0)
    return None


def _join(parts: List[str]) -> str:
    return " ".join(p.strip() for p in parts if p.strip())


def _parse_docstring(doc: str) -> Tuple[str, Dict[str, str]]:
    """Split a cleaned docstring into (description, {parameter: text}).

    The description is everything before the first section (Google ``Args:``, numpy ``Parameters`` + rule, or a
    Sphinx ``:param`` field); parameter texts come from the Args-like sections of any of those styles, with
    continuation lines joined by spaces.
    """
    lines = doc.expandtabs().splitlines()
    description_lines: List[str] = []
    params: Dict[str, str] = {}
    i = 0
    while i < len(lines) and _section_kind(lines, i) is None:
        description_lines.append(lines[i])
        i += 1

    while i < len(lines):
        kind = _section_kind(lines, i)
        if kind is None:
            i += 1
            continue
        style, name, header_len = kind
        if style == "sphinx":
            m = _SPHINX_PARAM.match(lines[i].strip())
            base = _indent(lines[i])
            field_lines = [m.group(2)] if m else []
            i += 1
            while i < len(lines) and not _SPHINX_FIELD.match(lines[i]):
                if lines[i].strip() and _indent(lines[i]) <= base:
                    break
                field_lines.append(lines[i])
                i += 1
            if m:
                params[m.group(1).lstrip("*")] = _join(field_lines)
            continue

        base = _indent(lines[i])
        i += header_len
        body: List[str] = []
        while i < len(lines):
            line = lines[i]
            if line.strip() and (_section_kind(lines, i) is not None and _indent(line) <= base):
                break
            if style == "google" and line.strip() and _indent(line) <= base:
                break
            body.append(line)
            i += 1
        if name in _PARAM_SECTIONS:
            params.update(_parse_entries(body, style))

    description = inspect.cleandoc("\n".join(description_lines)).strip()
    return description, params


def _parse_entries(body: List[str], style: str) -> Dict[str, str]:
    entries: Dict[str, str] = {}
    nonblank = [line for line in body if line.strip()]
    if not nonblank:
        return entries
    entry_indent = min(_indent(line) for line in nonblank)
    current: Optional[List[str]] = None
    names: List[str] = []

    def flush() -> None:
        if current is not None:
            text = _join(current)
            for n in names:
                entries[n.lstrip("*")] = text

    for line in body:
        if not line.strip():
            continue
        if _indent(line) == entry_indent:
            content = line.strip()
            m = _GOOGLE_ENTRY.match(content) if style == "google" else _NUMPY_ENTRY.match(content)
            if m:
                flush()
                if style == "google":
                    names = [m.group(1)]
                    current = [m.group(3) or ""]
                else:
                    names = [n.strip() for n in m.group(1).split(",")]
                    current = []
                continue
        if current is not None:
            current.append(line)
    flush()
    return entries


parse_docstring = _parse_docstring
