"""The `tooloop` command: a coding agent in the terminal, built on ``tooloop.Agent``.

Kept apart from the library: ``import tooloop`` never loads this package, and this file loads nothing
until `main` runs, so neither the library nor ``tooloop --help`` pays for prompt_toolkit or rich.
"""

from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the `tooloop` console script; returns the exit code. Every process the command started
    ends with it, also on SIGTERM and SIGHUP (exit status 128 + the signal; see ``lifetime``)."""
    from . import lifetime, otel

    lifetime.install()
    # OTEL_EXPORTER_OTLP_ENDPOINT: the runs' spans go over OTLP, flushed before the command exits (cli/otel.py).
    flush = otel.start()
    try:
        from .app import main as _main

        return _main(argv)
    except lifetime.Terminated as t:
        return 128 + t.signum
    finally:
        if flush is not None:
            flush()


__all__ = ["main"]
