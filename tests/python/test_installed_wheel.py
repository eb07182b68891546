"""CI runs this suite against the installed release wheel (scripts/test.sh builds it, installs it in a fresh
venv and sets TOOLOOP_TEST_WHEEL to its path, with cargo and rustc off PATH): every other test here then
exercises what `pip install tooloop` gives a user, not the source tree. This test pins that it really is so."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import sys
import sysconfig
from pathlib import Path

from _support import ROOT, require


def test_the_suite_imports_tooloop_from_the_installed_wheel_without_a_rust_toolchain() -> None:
    wheel = os.environ.get("TOOLOOP_TEST_WHEEL", "")
    require(bool(wheel), "a run against the installed wheel (scripts/test.sh sets TOOLOOP_TEST_WHEEL)")
    import tooloop
    from tooloop import _tooloop

    site = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    package = Path(tooloop.__file__).resolve().parent
    assert package.parent in site, f"tooloop comes from {package}, not this venv's site-packages {site}"
    assert Path(_tooloop.__file__).resolve() == package / "_tooloop.abi3.so"
    # The source package is not importable at all: nothing on sys.path is the repository's python/.
    assert (ROOT / "python").resolve() not in {Path(p or ".").resolve() for p in sys.path}
    # The installed distribution is that wheel file (pip records where it came from), abi3 for CPython 3.9+.
    dist = importlib.metadata.distribution("tooloop")
    direct_url = json.loads(dist.read_text("direct_url.json") or "{}")
    assert direct_url.get("url", "").endswith("/" + Path(wheel).name), direct_url
    tags = [line.split(": ", 1)[1] for line in (dist.read_text("WHEEL") or "").splitlines()
            if line.startswith("Tag: ")]
    assert tags and all(t.startswith("cp39-abi3-manylinux") for t in tags), tags
    assert shutil.which("cargo") is None and shutil.which("rustc") is None, "a Rust toolchain is on PATH"
