"""A low-level MCP SDK server that pages tools/list (two tools per page), used by tests/mcp.rs: MCPServer
(FastMCP) returns every tool in one page, so pagination needs the low-level Server API."""

import anyio

import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOLS = [f"tool{i}" for i in range(5)]
PAGE = 2


async def list_tools(ctx, params):
    start = int(params.cursor) if params is not None and params.cursor else 0
    page = TOOLS[start : start + PAGE]
    tools = [
        types.Tool(name=n, description=f"Tool number {n[4:]}", input_schema={"type": "object", "properties": {}})
        for n in page
    ]
    nxt = str(start + PAGE) if start + PAGE < len(TOOLS) else None
    return types.ListToolsResult(tools=tools, next_cursor=nxt)


async def call_tool(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"called {params.name}")])


server = Server("paged", on_list_tools=list_tools, on_call_tool=call_tool)


async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
