"""A streamable-HTTP MCP server for tests/it/mcp_servers/, on the official Python SDK.

Usage: http_server.py HEADER VALUE [empty-discover]. Listens on a free port of 127.0.0.1, prints
`PORT <n>` on stdout, and answers 401 to every request whose HEADER is not VALUE (printing
`REFUSED` on stdout for each). Tool: `echo(text)`. With `empty-discover` it answers
`server/discover` with an empty result, as servers that answer every method they do not know
with `{}` do (printing `DISCOVER`).
"""

import json
import socket
import sys

import uvicorn
from mcp.server.mcpserver import MCPServer

header, expected = sys.argv[1].lower().encode(), sys.argv[2].encode()
empty_discover = sys.argv[3:] == ["empty-discover"]
server = MCPServer("kin-test-http")


@server.tool()
def echo(text: str) -> str:
    """Says the text back."""
    return f"echo: {text}"


inner = server.streamable_http_app()


async def app(scope, receive, send):
    if scope["type"] == "http" and dict(scope["headers"]).get(header) != expected:
        print("REFUSED", flush=True)
        await send({"type": "http.response.start", "status": 401, "headers": []})
        await send({"type": "http.response.body", "body": b"missing header"})
        return
    if empty_discover and scope["type"] == "http" and scope["method"] == "POST":
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        request = json.loads(body or b"{}")
        if request.get("method") == "server/discover":
            print("DISCOVER", flush=True)
            answer = json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "result": {}})
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": answer.encode()})
            return

        pending = [{"type": "http.request", "body": body, "more_body": False}]

        async def replay():
            return pending.pop() if pending else await receive()

        await inner(scope, replay, send)
        return
    await inner(scope, receive, send)


sock = socket.socket()
sock.bind(("127.0.0.1", 0))
# Listening before the port is told: connections made from then on wait for uvicorn.
sock.listen(64)
print(f"PORT {sock.getsockname()[1]}", flush=True)
config = uvicorn.Config(app, log_level="warning", lifespan="on")
uvicorn.Server(config).run(sockets=[sock])
