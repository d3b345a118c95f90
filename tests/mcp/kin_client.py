"""An MCP client of `kin mcp` on the official Python SDK, for tests/it/mcp_serve/.

Usage: kin_client.py KIN SCENARIO [ARG...]. Starts `KIN mcp` on stdio (the environment is
passed on: KIN_HOME, the model settings) or, for `http URL`, connects to a running
`kin mcp --listen`. Prints one JSON object per line on stdout: what the scenario observed.
Scenarios:
  tools                      the listed tools (name, description, inputSchema)
  call TOOL JSON             one call, with the progress messages it received
  allowed TOOL JSON          the same on a server started with --mode allow
  background PROMPT          kin(background) then kin_output(wait) and kin_list
  cancel PROMPT              a foreground kin cancelled once progress arrives, then kin_list
                             and kin_output(wait) of the session
  cancel-when FIFO JSON      a foreground kin(JSON) cancelled once a line can be read from FIFO
                             (a git hook of the checkout says it runs), then hangs up at once
  elicit JSON                a foreground kin whose client answers permission asks through
                             elicitation with allow: true (and prints each question)
  steer FIFO PROMPT MESSAGE  on a server started with --mode allow: kin(background, allow);
                             once the model's command has opened FIFO for reading (the task is
                             mid-turn), kin_reply(MESSAGE, background), then a line into FIFO
                             to let the command end, then kin_output(wait)
  http URL TOKEN PROMPT      over streamable HTTP with `Authorization: Bearer TOKEN`: the tool
                             names, then a foreground kin
"""

import json
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def out(value):
    print(json.dumps(value), flush=True)


def result_json(result, progress=None):
    text = "".join(block.text for block in result.content if block.type == "text")
    found = {"isError": bool(result.is_error), "text": text, "structured": result.structured_content}
    if progress is not None:
        found["progress"] = progress
    return found


async def call(session, tool, arguments):
    progress = []

    async def on_progress(value, total, message):
        progress.append(message)

    result = await session.call_tool(tool, arguments, progress_callback=on_progress)
    return result_json(result, progress)


async def scenario(session, name, args):
    if name == "tools":
        listed = await session.list_tools()
        out({"tools": [
            {"name": t.name, "description": t.description, "inputSchema": t.input_schema}
            for t in listed.tools
        ]})
    elif name == "call":
        out(await call(session, args[0], json.loads(args[1])))
    elif name == "background":
        started = await call(session, "kin", {"prompt": args[0], "background": True})
        out(started)
        sid = started["structured"]["sessionId"]
        out(await call(session, "kin_output", {"session_id": sid, "wait": True, "timeout_seconds": 60}))
        out(await call(session, "kin_list", {}))
    elif name == "cancel":
        progressed = anyio.Event()

        async def on_progress(value, total, message):
            progressed.set()

        async with anyio.create_task_group() as group:
            async def run():
                await session.call_tool("kin", {"prompt": args[0]}, progress_callback=on_progress)
                out({"unexpected": "the cancelled call answered"})

            group.start_soon(run)
            await progressed.wait()
            group.cancel_scope.cancel()
        listed = await call(session, "kin_list", {})
        out(listed)
        sid = listed["structured"]["sessions"][0]["sessionId"]
        out(await call(session, "kin_output", {"session_id": sid, "wait": True, "timeout_seconds": 60}))
    elif name == "cancel-when":
        fifo, arguments = args
        async with anyio.create_task_group() as group:
            async def run():
                await session.call_tool("kin", json.loads(arguments))
                out({"unexpected": "the cancelled call answered"})

            group.start_soon(run)
            # Opening a FIFO for reading returns once its writer (the hook) opened it.
            said = await anyio.to_thread.run_sync(lambda: open(fifo).read())
            out({"hook": said.strip()})
            group.cancel_scope.cancel()
    elif name == "steer":
        fifo, prompt, message = args
        started = await call(session, "kin", {"prompt": prompt, "mode": "allow", "background": True})
        out(started)
        sid = started["structured"]["sessionId"]
        # Opening a FIFO for writing returns once its reader (the model's command) opened it.
        pipe = await anyio.to_thread.run_sync(lambda: open(fifo, "w"))
        out(await call(session, "kin_reply", {"session_id": sid, "prompt": message, "background": True}))
        pipe.write("go\n")
        pipe.close()
        out(await call(session, "kin_output", {"session_id": sid, "wait": True, "timeout_seconds": 60}))
    else:
        raise SystemExit(f"unknown scenario {name}")


async def main():
    kin, name, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    if name == "http":
        url, token, prompt = args
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with http, streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                listed = await session.list_tools()
                out({"names": [t.name for t in listed.tools]})
                out(await call(session, "kin", {"prompt": prompt}))
        return
    server_args = ["mcp", "--mode", "allow"] if name in ("steer", "allowed") else ["mcp"]
    if name == "allowed":
        name = "call"
    params = StdioServerParameters(command=kin, args=server_args, env=dict(os.environ))
    callback = None
    if name == "elicit":
        async def callback(context, params):
            out({"asked": params.message})
            return types.ElicitResult(action="accept", content={"allow": True})

        name, args = "call", ["kin", args[0]]
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=callback) as session:
            await session.initialize()
            await scenario(session, name, args)


anyio.run(main)
