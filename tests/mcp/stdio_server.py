"""A stdio MCP server for tests/it/mcp_servers.rs, on the official Python SDK.

Usage: stdio_server.py MARKS GO, two FIFOs. The server writes a line to MARKS when it lists
its tools (`listed <n>`, n counting the listings of this process), when `wait` starts
(`waiting`) and when `wait` is cancelled by the client (`cancelled`); it reads a line from GO
when `count` may return.

Tools: `echo(text)`; `wait()`, which returns only when cancelled; `grow()`, which adds the
tool `grown` and tells the client the list changed; `crash()`, which ends the process;
`count(n)`, which reports progress 1..n and returns once the test writes to GO;
`picture()`, which returns a caption and a small PNG (the bytes of `PICTURE`).
"""

import asyncio
import os
import sys

from mcp.server.mcpserver import Context, Image, MCPServer

marks_path, go_path = sys.argv[1], sys.argv[2]
listings = 0


def mark(line: str) -> None:
    with open(marks_path, "w") as marks:
        marks.write(line + "\n")


class Server(MCPServer):
    async def list_tools(self):
        global listings
        tools = await super().list_tools()
        listings += 1
        mark(f"listed {listings}")
        return tools


server = Server("kin-test-stdio")


@server.tool()
def echo(text: str) -> str:
    """Says the text back."""
    return f"echo: {text}"


@server.tool()
async def wait() -> str:
    """Waits until cancelled."""
    mark("waiting")
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        mark("cancelled")
        raise
    return "never"


def grown() -> str:
    """Added by grow."""
    return "grown ran"


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `grown`."""
    server.add_tool(grown)
    # A client on a revision with `initialize` hears it at once; one on the stateless revision
    # (2026-07-28) through its `subscriptions/listen` stream.
    await ctx.request_context.session.send_tool_list_changed()
    await ctx.notify_tools_changed()
    return "grew"


@server.tool()
async def count(n: int, ctx: Context) -> str:
    """Reports progress n times, then waits for the test."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i}")
    await asyncio.to_thread(lambda: open(go_path).readline())
    return f"counted {n}"


# A PNG signature and a few bytes: enough for an image block; no model decodes it in tests.
PICTURE = b"\x89PNG\r\n\x1a\nkin-test-picture"


@server.tool()
def picture() -> list:
    """Returns a caption and a picture."""
    return ["a test picture", Image(data=PICTURE, format="png")]


@server.tool()
def crash() -> str:
    """Ends the server process at once."""
    os._exit(3)


server.run()
