"""The installed wheel works on this interpreter (scripts/test.sh runs it on the oldest CPython it finds, to
show the abi3 wheel holds there): `tooloop` imports from this environment's site-packages, not a source tree,
its compiled module is the abi3 one, and an agent with a Python tool runs against the mock server (mockctl
sets ANTHROPIC_BASE_URL and the key), and the `tooloop` command starts (`--version`).

    python3 tests/mock/mockctl.py run tests/scenarios/anthropic_tool_then_text.json -- PYTHON wheel_smoke.py

Standard library and tooloop only; written for Python 3.9.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Dict, Union

import tooloop
from tooloop import _tooloop


def main() -> int:
    site = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    package = Path(tooloop.__file__).resolve().parent
    assert package.parent in site, f"tooloop imported from {package}, not from {site}"
    assert Path(_tooloop.__file__).name == "_tooloop.abi3.so", _tooloop.__file__

    agent = tooloop.Agent(model="claude-sonnet-4-6", max_turns=4)

    @agent.tool
    def get_weather(city: str, units: str = "celsius") -> Dict[str, Union[str, int]]:
        """Current weather of a city.

        Args:
            city: The city name.
            units: "celsius" or "fahrenheit".
        """
        return {"city": city, "temperature": 18, "units": units}

    result = agent.run("Weather in Paris?")
    assert [c.name for c in result.tool_calls] == ["get_weather"], result.tool_calls
    assert result.tool_calls[0].input == {"city": "Paris"}, result.tool_calls[0].input
    assert "18 °C" in result.text, result.text
    exe = Path(sys.executable).parent / "tooloop"
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and tooloop.__version__ in out.stdout, (out.returncode, out.stdout, out.stderr)
    print(f"tooloop {tooloop.__version__} on CPython {sys.version.split()[0]} ({package}): "
          f"tool call and answer OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
