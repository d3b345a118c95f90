#!/usr/bin/env python3
"""The client the MCP conformance suite launches: drives kin's MCP client through the real binary.

The suite runs `client.py <server-url>` with MCP_CONFORMANCE_SCENARIO set. This script names the
server `x` in the config file of a throwaway home, answers kin's model requests itself (a
scripted OpenAI-compatible model on loopback that calls the scenario's tool once, then ends the
turn), and runs `kin run`. For auth scenarios it first runs `kin mcp login x` with `$BROWSER` a
curl that follows the authorization URL back to kin's loopback redirect. Standard library only.

Environment: KIN_BIN (kin binary, default `kin` on PATH). KIN_CONFORMANCE_LOGIN=session: for
auth scenarios, no `kin mcp login`; `kin acp` logs in itself on the server's 401 challenge (the
login kin starts inside a session) and the editor played here prompts again until the tool was
called. The elicitation scenario (and KIN_CONFORMANCE_ACP=1) drives `kin acp` as an editor that
takes forms and accepts them empty, instead of `kin run`.
"""

import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

SERVER = "x"
PREFIX = f"mcp__{SERVER}__"
CALLED = threading.Event()
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


def sse(chunks):
    body = ""
    for delta, finish in chunks:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        body += "data: " + json.dumps({"id": "c", "object": "chat.completion.chunk",
                                       "created": 0, "model": "mock", "choices": [choice]}) + "\n\n"
    return (body + "data: [DONE]\n\n").encode()


def answer(request):
    """One model step: call the scenario's MCP tool unless a tool result is already there."""
    messages = request.get("messages", [])
    if any(m.get("role") == "tool" for m in messages):
        return sse([({"role": "assistant", "content": "done"}, None), ({}, "stop")])
    tools = [t["function"]["name"] for t in request.get("tools", [])]
    ours = [t for t in tools if t.startswith(PREFIX)]
    if not ours:
        return sse([({"role": "assistant", "content": "no MCP tool offered"}, None), ({}, "stop")])
    name = ours[0]
    CALLED.set()
    arguments = {"a": 2, "b": 3} if name.endswith("add_numbers") else {}
    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}
    return sse([({"role": "assistant", "content": None, "tool_calls": [call]}, None),
                ({}, "tool_calls")])


class Model(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("content-length", 0))
        body = answer(json.loads(self.rfile.read(length) or b"{}"))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.send_error(404)

    def log_message(self, *args):
        pass


def acp_session(kin, env, cwd, prompts):
    """Plays an editor that advertises form elicitation and accepts forms empty; prompts until
    the model called the tool, at most `prompts` times."""
    proc = subprocess.Popen([kin, "acp"], env=env, cwd=cwd, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)

    def send(message):
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()

    def until(ident):
        for line in proc.stdout:
            message = json.loads(line)
            if "method" in message and "id" in message:
                if message["method"] == "elicitation/create":
                    # Accept with no values: defaults are the client's to fill in (SEP-1034).
                    send({"jsonrpc": "2.0", "id": message["id"],
                          "result": {"action": "accept", "content": {}}})
                elif message["method"] == "session/request_permission":
                    options = message["params"]["options"]
                    send({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": {
                        "outcome": "selected", "optionId": options[0]["optionId"]}}})
                else:
                    send({"jsonrpc": "2.0", "id": message["id"],
                          "error": {"code": -32601, "message": "not offered"}})
            elif message.get("id") == ident:
                return message
        raise SystemExit("kin acp closed its stdout")

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": 1,
        "clientCapabilities": {"elicitation": {"form": {}}}}})
    until(1)
    send({"jsonrpc": "2.0", "id": 2, "method": "session/new",
          "params": {"cwd": cwd, "mcpServers": []}})
    session = until(2)["result"]["sessionId"]
    send({"jsonrpc": "2.0", "id": 3, "method": "session/set_mode",
          "params": {"sessionId": session, "modeId": "allow"}})
    until(3)
    for ident in range(4, 4 + prompts):
        send({"jsonrpc": "2.0", "id": ident, "method": "session/prompt", "params": {
            "sessionId": session, "prompt": [{"type": "text", "text": "Call the tool."}]}})
        result = until(ident)
        if CALLED.is_set() or "result" not in result:
            break
        time.sleep(0.5)  # the login kin started runs in the background
    proc.stdin.close()
    proc.wait(timeout=20)
    return 0 if "result" in result else 1


def main():
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    kin = os.environ.get("KIN_BIN", "kin")
    model = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Model)
    threading.Thread(target=model.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(f"{root}/config/kin")
        os.makedirs(f"{root}/work")
        table = f'[mcp_servers.{SERVER}]\nurl = "{url}"\n'
        # The client metadata document the suite's authorization servers expect as the client
        # id where they take one (auth/basic-cimd); the others have kin register itself.
        table += f'client_metadata_url = "{CLIENT_METADATA_URL}"\n'
        # A client registered beforehand (auth/pre-registration): its id in the config, its
        # secret in a variable the config names.
        context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
        secrets = {}
        if context.get("client_id"):
            table += f'client_id = {json.dumps(context["client_id"])}\n'
        if context.get("client_secret"):
            table += 'client_secret_env = "X_CLIENT_SECRET"\n'
            secrets["X_CLIENT_SECRET"] = context["client_secret"]
            # A client acting for itself (SEP-1046): its user configures the grant.
            if scenario.startswith("auth/client-credentials"):
                table += 'grant = "client_credentials"\n'
        # A client acting for itself that signs its token requests (private_key_jwt): its key
        # in a file the config names.
        if context.get("private_key_pem"):
            with open(f"{root}/config/kin/client-key.pem", "w") as key:
                key.write(context["private_key_pem"])
            os.chmod(f"{root}/config/kin/client-key.pem", 0o600)
            table += 'grant = "client_credentials"\nprivate_key_file = "client-key.pem"\n'
        # Enterprise-managed authorization (SEP-990): the user's IdP, and a command printing
        # the ID token it gave them (here a file holding the suite's).
        if context.get("idp_id_token"):
            with open(f"{root}/id-token", "w") as token:
                token.write(context["idp_id_token"])
            os.chmod(f"{root}/id-token", 0o600)
            table += ('grant = "enterprise"\n'
                      f'idp_issuer = {json.dumps(context["idp_issuer"])}\n'
                      f'idp_token_endpoint = {json.dumps(context["idp_token_endpoint"])}\n'
                      f'idp_client_id = {json.dumps(context["idp_client_id"])}\n'
                      f'id_token_command = "cat {root}/id-token"\n')
        with open(f"{root}/config/kin/config.toml", "w") as config:
            config.write(table)
        browser = f"{root}/browser.sh"
        with open(browser, "w") as script:
            script.write('#!/bin/sh\nexec curl -sS -L -o /dev/null "$1"\n')
        os.chmod(browser, 0o755)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KIN_", "XDG_"))}
        env.update(HOME=root, XDG_CONFIG_HOME=f"{root}/config", KIN_HOME=f"{root}/data",
                   KIN_KEY_STORE="file", BROWSER=browser, KIN_API_KEY="conformance",
                   KIN_MODEL="mock", KIN_RETRIES="0",
                   KIN_BASE_URL=f"http://127.0.0.1:{model.server_address[1]}", **secrets)
        in_session = os.environ.get("KIN_CONFORMANCE_LOGIN") == "session"
        if scenario.startswith("auth/") and not in_session:
            login = subprocess.run([kin, "mcp", "login", SERVER], env=env, cwd=f"{root}/work",
                                   stdin=subprocess.DEVNULL, timeout=20)
            print(f"kin mcp login exited {login.returncode}", file=sys.stderr)
        if scenario.startswith("auth/") and in_session:
            return acp_session(kin, env, f"{root}/work", 20)
        if os.environ.get("KIN_CONFORMANCE_ACP") == "1" or scenario.startswith("elicitation"):
            return acp_session(kin, env, f"{root}/work", 1)
        run = subprocess.run([kin, "run", "--mode", "allow", "Call the tool."], env=env,
                             cwd=f"{root}/work", stdin=subprocess.DEVNULL, timeout=30)
        return run.returncode


if __name__ == "__main__":
    sys.exit(main())
