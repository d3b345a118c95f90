"""A stdio MCP server that misbehaves on request, for tests/it/mcp_bounds.rs; on the official
Python SDK's low-level server.

Usage: paging_server.py MODE [N]. MODE says how `tools/list` pages:
  repeat    every page has one tool and the next cursor "again" (a repeated cursor)
  endless   every page has one tool and a new next cursor (pages without end)
  many N    N tools in pages of 40, the last page without a cursor (well-behaved)
Tools (on every page set): `echo(text)`; `slow()`, which never answers; `big()`, whose
answer is a 17 MiB text.
"""

import sys

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

mode = sys.argv[1]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 0
PAGE = 40
SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}


def tool(name: str) -> types.Tool:
    return types.Tool(name=name, description=f"The tool {name}.", input_schema=SCHEMA)


FIXED = [tool("echo"), tool("slow"), tool("big")]


async def list_tools(ctx, params):
    cursor = params.cursor if params else None
    if mode == "repeat":
        return types.ListToolsResult(tools=FIXED if cursor is None else [tool("again")],
                                     next_cursor="again")
    if mode == "endless":
        page = 0 if cursor is None else int(cursor) + 1
        return types.ListToolsResult(tools=FIXED if page == 0 else [tool(f"t{page}")],
                                     next_cursor=str(page))
    start = 0 if cursor is None else int(cursor)
    names = [f"t{i}" for i in range(start, min(start + PAGE, count))]
    tools = [tool(name) for name in names] + (FIXED if start == 0 else [])
    following = start + PAGE
    return types.ListToolsResult(tools=tools,
                                 next_cursor=str(following) if following < count else None)


async def call_tool(ctx, params):
    if params.name == "slow":
        await anyio.sleep_forever()
    if params.name == "big":
        text = "x" * (17 * 1024 * 1024)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
    text = (params.arguments or {}).get("text", "")
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"echo: {text}")])


server = Server("kin-test-paging", on_list_tools=list_tools, on_call_tool=call_tool)


async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
