"""asyncio inside Jupyter (issue 40 item 6): in a real IPython kernel (ipykernel, driven through
jupyter_client), ``await agent.arun(...)`` in a cell runs on the kernel's own running loop (an ``async def``
tool is awaited there), and ``agent.run(...)`` from a cell keeps working as before (an ``async def`` tool then
gets a loop of its own, the cell's being busy). The kernel talks to the mock server like the other tests, and
is shut down (and its process gone) when the test ends."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from _support import text_reply, tool_reply, tool_results

pytest.importorskip("ipykernel")
jupyter_client = pytest.importorskip("jupyter_client")


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Any]:
    """A started kernel of this interpreter (a kernelspec of our own: never a system one), and its client."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec_dir = tmp_path / "kernels" / "tooloop-test"
    spec_dir.mkdir(parents=True)
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "tooloop test", "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    specs = KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")])
    km = KernelManager(kernel_name="tooloop-test", kernel_spec_manager=specs)
    # The kernel imports tooloop the way this process does (PYTHONPATH of a dev build, or the installed wheel).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    km.start_kernel(env=env, cwd=str(tmp_path))
    client = km.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        yield client
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)
        assert not km.is_alive()


def cell(client: Any, code: str, timeout: float = 60) -> str:
    """Run ``code`` as a cell; its printed output. An error in the cell fails the test with its traceback."""
    out: List[str] = []
    errors: List[Dict[str, Any]] = []

    def on_output(msg: Dict[str, Any]) -> None:
        kind, content = msg["header"]["msg_type"], msg["content"]
        if kind == "stream":
            out.append(content["text"])
        elif kind == "error":
            errors.append(content)

    reply = client.execute_interactive(code, output_hook=on_output, timeout=timeout)
    if reply["content"]["status"] != "ok" or errors:
        tb = "\n".join("\n".join(e.get("traceback", [])) for e in errors) or str(reply["content"])
        pytest.fail(f"cell failed:\n{code}\n{tb}")
    return "".join(out)


SETUP = """
import asyncio, threading
import tooloop

seen = {{}}

async def lookup(key: str) -> str:
    \"\"\"Look a key up.\"\"\"
    seen["loop"] = asyncio.get_running_loop()
    seen["thread"] = threading.get_ident()
    return "value of " + key

agent = tooloop.Agent(model="claude-sonnet-4-6", base_url={url!r}, api_key="sk-ant-mock", max_retries=0,
                      tools=[lookup])
"""


def test_await_arun_in_a_cell_runs_on_the_kernels_loop_and_run_keeps_working(mock: Any, kernel: Any) -> None:
    server = mock({"responses": [tool_reply(("c1", "lookup", {"key": "a"})), text_reply("async answer"),
                                 tool_reply(("c2", "lookup", {"key": "b"})), text_reply("sync answer")]})
    cell(kernel, SETUP.format(url=server.base_url))
    # Top-level await: IPython runs the cell on the kernel's running loop.
    out = cell(kernel, "cell_loop = asyncio.get_running_loop()\n"
                       "result = await agent.arun('go')\n"
                       "print(result.text, seen['loop'] is cell_loop, seen['thread'] == threading.get_ident())")
    assert out.split() == ["async", "answer", "True", "True"]
    # A blocking run from a cell while the kernel's loop is running: as before, the async tool gets a loop of its
    # own (the cell's is busy running this cell).
    out = cell(kernel, "seen.clear()\n"
                       "result = agent.run('again')\n"
                       "print(result.text, seen['loop'] is not asyncio.get_event_loop())")
    assert out.split() == ["sync", "answer", "True"]
    requests = server.requests()
    assert tool_results(requests[1]) == {"c1": ("value of a", False)}
    assert tool_results(requests[3]) == {"c1": ("value of a", False), "c2": ("value of b", False)}
