"""A stdio MCP server that asks its user questions (elicitation), for tests/it/mcp_elicitation.rs,
on the official Python SDK.

Tools: `greet()`, which asks the user their name (a form), and `proceed()`, which asks a yes/no;
`pick()` asks for one of three colours; `visit()` sends the user to a URL mid-call and then says the URL's step is complete;
both ask through the SDK's resolvers (mid-call on a revision with `initialize`, as an
`input_required` round on the stateless 2026-07-28). `greet_now()` asks mid-call, as servers
on revisions with `initialize` do. With KIN_TEST_MCP_LEGACY set, the server answers
`server/discover` as such a server would (method not found), so clients speak 2025-11-25
(a proxy in front of the SDK server, which would otherwise keep to the stateless revision).
Each tool returns what the user answered.
"""

import json
import os
import subprocess
import sys
from typing import Annotated, Literal

from pydantic import BaseModel

from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve

server = MCPServer("kin-test-ask")


class Name(BaseModel):
    name: str


class Go(BaseModel):
    go: bool


class Colour(BaseModel):
    colour: Literal["red", "green", "blue"]


def ask_colour() -> Elicit[Colour]:
    return Elicit("Which colour?", Colour)


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


def ask_go() -> Elicit[Go]:
    return Elicit("Go on?", Go)


@server.tool()
async def greet(answer: Annotated[ElicitationResult[Name], Resolve(ask_name)]) -> str:
    """Asks the user their name."""
    if answer.action == "accept":
        return f"hello {answer.data.name}"
    return f"no name ({answer.action})"


@server.tool()
async def proceed(answer: Annotated[ElicitationResult[Go], Resolve(ask_go)]) -> str:
    """Asks the user whether to go on."""
    if answer.action == "accept":
        return f"go: {answer.data.go}"
    return f"not answered ({answer.action})"


@server.tool()
async def pick(answer: Annotated[ElicitationResult[Colour], Resolve(ask_colour)]) -> str:
    """Asks the user to pick a colour."""
    if answer.action == "accept":
        return f"colour: {answer.data.colour}"
    return f"no colour ({answer.action})"


@server.tool()
async def greet_now(ctx: Context) -> str:
    """Asks the user their name in the middle of the call."""
    answer = await ctx.elicit("What is your name?", Name)
    if answer.action == "accept":
        return f"hello {answer.data.name}, mid-call"
    return f"no name ({answer.action})"


@server.tool()
async def visit(ctx: Context) -> str:
    """Sends the user to a page in the middle of the call, and says when that is done."""
    answer = await ctx.elicit_url("Open the page to go on.", "https://example.com/consent", "visit-7")
    if answer.action == "accept":
        # The page's work is done out of band; the client hears of it.
        await ctx.session.send_elicit_complete("visit-7")
    return f"visit: {answer.action}"


@server.tool()
async def visit_file(ctx: Context) -> str:
    """Sends the user to a `file:` address, under a message with a terminal escape and 5000
    more characters."""
    message = "Open \x1b]0;owned\x07 this." + "x" * 5000
    answer = await ctx.elicit_url(message, "file:///etc/passwd", "visit-8")
    return f"file visit: {answer.action}"


@server.tool()
async def ask_many(ctx: Context) -> str:
    """Asks nine yes/no questions in a row, mid-call; says what became of each."""
    actions = []
    for n in range(9):
        answer = await ctx.elicit(f"Go on ({n})?", Go)
        actions.append(answer.action)
    return "many: " + ",".join(actions)


@server.tool()
async def greet_loud(ctx: Context) -> str:
    """Asks a question whose message carries a terminal escape and 5000 more characters."""
    answer = await ctx.elicit("Name? \x1b]0;owned\x07" + "y" * 5000, Name)
    return f"loud: {answer.action}"


def serve_as_older_server():
    """Answers `server/discover` itself, as a server on an older revision does (method not
    found), and passes everything else to this server run as a child, which so never sees a
    stateless client."""
    child = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=sys.stdout,
                             env={**os.environ, "KIN_TEST_MCP_LEGACY": ""})
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("method") == "server/discover":
            error = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "Method not found"}}
            # Before the child has said anything: the lines cannot interleave.
            sys.stdout.write(json.dumps(error) + "\n")
            sys.stdout.flush()
            continue
        child.stdin.write(line.encode())
        child.stdin.flush()
    child.stdin.close()
    child.wait()


if os.environ.get("KIN_TEST_MCP_LEGACY"):
    serve_as_older_server()
    sys.exit(0)


server.run()
