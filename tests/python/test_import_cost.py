"""`import tooloop` stays cheap: the heavy standard modules load when first needed (a tool built
from a function, a tool that raises), not at import. Timing itself is measured by bench/import_time.py, not
here: a timed test would be flaky on a shared machine."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("typing", "inspect", "logging", "dataclasses", "asyncio", "pathlib", "uuid", "datetime", "copy",
         "tooloop._client",
         "tooloop._schema", "tooloop._docstring", "tooloop.cli")


def modules_after(code: str) -> set:  # type: ignore[type-arg]
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True, timeout=60)
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_import_tooloop_loads_none_of_the_heavy_modules() -> None:
    # `json` is imported by the probe itself, after tooloop: so it is not in the list.
    loaded = modules_after("import tooloop")
    assert "tooloop._tooloop" in loaded
    assert [m for m in HEAVY if m in loaded] == []


def test_building_a_tool_loads_the_schema_builder_then() -> None:
    loaded = modules_after("import tooloop\n@tooloop.tool\ndef f(x: int) -> int:\n    'Double.'\n    return 2 * x\n"
                           "assert f.input_schema['properties'] == {'x': {'type': 'integer'}}")
    assert {"tooloop._schema", "tooloop._docstring", "inspect"} <= loaded
    assert "logging" not in loaded  # only a tool that raises needs it
