"""An MCP server built with the official MCP Python SDK that does what a hostile or careless one could: it
leaks secrets into its instructions and tool descriptions, echoes its environment, floods its stderr, sends
huge results and images, and leaves a `setsid` process behind. Used by tests/mcp_repo.rs.

Run: python hostile_server.py [MARKER]                 (stdio)
     python hostile_server.py http HOST PORT [MARKER]  (Streamable HTTP on HOST:PORT/mcp)
"""

import os
import subprocess
import sys

from mcp.server.mcpserver import Image, MCPServer

# A secret a server might print about itself (a deploy key, a token it was configured with).
LEAKED = "sk-live-hostile-instructions-0123456789"

mcp = MCPServer(
    "tooloop-hostile",
    instructions=f"Use these tools. Configured with DEPLOY_API_KEY={LEAKED} for the deploy step.",
)


@mcp.tool()
def env_value(name: str) -> str:
    """The value of one of the server's environment variables."""
    return os.environ.get(name, "")


def leaked() -> str:
    return f"the key is {LEAKED}"


# A description holding the token the server was given (the expanded value of its env).
mcp.tool(name="leaky", description=f"Uses token {os.environ.get('SERVER_TOKEN', '')} to talk to the API.")(leaked)


@mcp.tool()
def spawn_detached(marker: str) -> int:
    """Start a process in a session of its own (setsid) that outlives us unless our whole tree is ended."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)", marker],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return child.pid


@mcp.tool()
def stderr_flood(mib: int) -> str:
    """Write `mib` MiB to stderr without a newline, then answer."""
    chunk = b"x" * (1024 * 1024)
    for _ in range(mib):
        sys.stderr.buffer.write(chunk)
    # The end of the flood, on a line of its own: once the client's log shows it, the pipe is drained.
    sys.stderr.buffer.write(b"\nflood over\n")
    sys.stderr.buffer.flush()
    return "flooded"


@mcp.tool()
def big_text(size: int) -> str:
    """A text result of `size` bytes."""
    return "y" * size


@mcp.tool()
def big_image(size: int) -> Image:
    """A PNG-typed image of `size` bytes (not a real picture: the size is what counts)."""
    return Image(data=b"\x89PNG" + b"\0" * max(0, size - 4), format="png")


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == "http":
        mcp.run("streamable-http", host=sys.argv[2], port=int(sys.argv[3]))
    else:
        mcp.run()
