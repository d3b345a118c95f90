"""A stdio MCP server written by hand (no SDK), to send what no SDK sends: an answer nested
200 deep, a line that is not JSON, and a request kin cannot decode (whose answer it reports).
Used by tests/it/mcp_bounds.rs."""
import json
import sys

TOOLS = [{"name": name, "description": name, "inputSchema": {"type": "object"}}
         for name in ("deep", "garbled", "ask")]
asking = None


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(call_id, words):
    send({"jsonrpc": "2.0", "id": call_id,
          "result": {"content": [{"type": "text", "text": words}]}})


def nested(depth):
    return "[" * depth + "1" + "]" * depth


for line in sys.stdin:
    message = json.loads(line)
    method, call_id = message.get("method"), message.get("id")
    if method is None:
        if call_id == "q1" and asking is not None:
            text(asking, "answered: %s" % json.dumps(message.get("error", {}).get("code")))
        continue
    if call_id is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": call_id, "result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": call_id, "result": {"tools": TOOLS}})
    elif method == "tools/call" and message["params"]["name"] == "deep":
        sys.stdout.write('{"jsonrpc":"2.0","id":%s,"result":{"content":%s}}\n'
                         % (json.dumps(call_id), nested(200)))
        sys.stdout.flush()
    elif method == "tools/call" and message["params"]["name"] == "garbled":
        sys.stdout.write("this is not JSON\n")
        sys.stdout.flush()
    elif method == "tools/call" and message["params"]["name"] == "ask":
        asking = call_id
        sys.stdout.write('{"jsonrpc":"2.0","id":"q1","method":"elicitation/create","params":%s}\n'
                         % nested(200))
        sys.stdout.flush()
    else:
        send({"jsonrpc": "2.0", "id": call_id,
              "error": {"code": -32601, "message": "Method not found"}})
