#!/usr/bin/env python3
"""Fuzz the CLI's workspace .env parser (python/tooloop/cli/config.py `parse_dotenv`, issue 20 item 14) with
atheris (libFuzzer for Python): any text must parse without an exception, in time linear in its length
(-timeout catches a backtracking pattern), into names that are identifiers; and a plain `KEY=value` line
built from the input must come back unchanged.

    pip install atheris
    python3 fuzz/dotenv_fuzz.py fuzz/corpus/dotenv -max_total_time=600 -timeout=2 -max_len=65536

The module is loaded from its file (it uses the standard library only), so no compiled tooloop is needed.
"""

import importlib.util
import re
import sys
from pathlib import Path

import atheris

CONFIG = Path(__file__).resolve().parent.parent / "python" / "tooloop" / "cli" / "config.py"

spec = importlib.util.spec_from_file_location("tooloop_cli_config", CONFIG)
assert spec is not None and spec.loader is not None
config = importlib.util.module_from_spec(spec)
sys.modules["tooloop_cli_config"] = config
spec.loader.exec_module(config)
for fn in (config.parse_dotenv, config._unescape, config._cut_comment):
    atheris.instrument_func(fn)

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
PLAIN = re.compile(r"[A-Za-z0-9_./:@+-]*\Z")


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    text = fdp.ConsumeUnicodeNoSurrogates(len(data))
    values = config.parse_dotenv(text)
    for key, value in values.items():
        assert NAME.match(key), key
        assert isinstance(value, str)
    # A plain line round-trips, whatever surrounds it.
    value = "".join(c for c in text[:40] if c.isascii() and (c.isalnum() or c in "_./:@+-"))
    if PLAIN.match(value):
        got = config.parse_dotenv(f"{text}\nFUZZ_KEY={value}\n").get("FUZZ_KEY")
        assert got == value, (value, got)


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
