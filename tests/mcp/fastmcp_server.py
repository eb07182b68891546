"""An MCP server built with the official MCP Python SDK (MCPServer, formerly FastMCP), used by tests/mcp.rs.

Run: python fastmcp_server.py            (stdio)
     python fastmcp_server.py http PORT  (Streamable HTTP on 127.0.0.1:PORT/mcp)
"""

import os
import sys
import time

import anyio
from pydantic import BaseModel

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

mcp = MCPServer("tooloop-test", instructions="Use echo to repeat text. The add tool adds integers.")


class Weather(BaseModel):
    city: str
    celsius: float


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    print(f"echo called with {text!r}", file=sys.stderr, flush=True)
    return f"echo: {text}"


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
def weather(city: str) -> Weather:
    """Structured weather for a city."""
    return Weather(city=city, celsius=21.5)


@mcp.tool()
def fail(message: str) -> str:
    """Always fails with the message."""
    raise ToolError(message)


@mcp.tool()
async def slow(seconds: float) -> str:
    """Sleep for the given number of seconds."""
    # Tests wait for this line to know the call is under way before they cancel it or kill the server.
    print("slow started", file=sys.stderr, flush=True)
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        print("slow was cancelled", file=sys.stderr, flush=True)
        raise
    return "done sleeping"


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
def pid() -> int:
    """The server's process id."""
    # As the host sees it: tooloop may start the server as process 1 of a PID namespace of its own, while
    # /proc (not remounted) still belongs to the host's namespace.
    try:
        return int(os.readlink("/proc/self"))
    except (OSError, ValueError):
        return os.getpid()


@mcp.tool()
def pixel() -> Image:
    """A 1x1 PNG image."""
    png = bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
    return Image(data=png, format="png")


@mcp.tool()
async def grow(ctx: Context) -> str:
    """Add a tool named 'late' and tell the client the tool list changed."""

    def late() -> str:
        """A tool added at run time."""
        return "late tool here"

    mcp.add_tool(late, name="late")
    await ctx.session.send_tool_list_changed()
    return "grown"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        mcp.run()
