"""How long `import tooloop` takes: medians of fresh interpreters, against a bare interpreter and, when it is
installed, `import anthropic` (the official SDK; pip install it into the venv for the comparison, it is not a
dependency).

    python bench/import_time.py [--runs N]

Each measurement is one `python -c ...` subprocess (wall time, start-up included), so nothing is cached in
the interpreter; the order of the candidates rotates every round so background load hits them alike. To see
where the time goes: `python -X importtime -c "import tooloop"`.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from typing import Dict, List


# Installed packages run from their .pyc files: a PYTHONDONTWRITEBYTECODE inherited from a CI or sandbox
# would make every child compile the sources again and measure the compiler instead.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def once(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=ENV)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=31, help="subprocesses per candidate (default 31)")
    args = parser.parse_args()

    candidates = {"bare (python -c pass)": "pass", "import tooloop": "import tooloop"}
    if importlib.util.find_spec("anthropic") is not None:
        candidates["import anthropic"] = "import anthropic"
    for code in candidates.values():
        once(code)  # warm the file-system cache and write the .pyc files
    times: Dict[str, List[float]] = {name: [] for name in candidates}
    names = list(candidates)
    for i in range(args.runs):
        for name in names[i % len(names):] + names[: i % len(names)]:
            times[name].append(once(candidates[name]))

    med = {name: statistics.median(ts) * 1000 for name, ts in times.items()}
    bare = med["bare (python -c pass)"]
    print(f"{sys.executable} ({sys.version.split()[0]}), {args.runs} runs each, medians:")
    for name, ms in med.items():
        extra = "" if name.startswith("bare") else f"   {ms / bare:.2f}x bare, +{ms - bare:.1f} ms"
        print(f"  {name:24s} {ms:7.1f} ms{extra}")
    if "import anthropic" in med:
        print(f"  import tooloop / import anthropic = {med['import tooloop'] / med['import anthropic']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
