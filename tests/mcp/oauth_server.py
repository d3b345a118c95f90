"""An MCP server behind OAuth for tests/it/mcp_oauth.rs: one loopback port serves the protected
resource (streamable HTTP at /mcp, on the official Python SDK) and its own authorization server
(metadata discovery, dynamic client registration, authorization code with PKCE S256, refresh
tokens that rotate). Besides the clients that register, it knows a pre-registered confidential
client (`PRE_ID`, secret `PRE_SECRET`, which must authenticate at /token with HTTP Basic) and
takes an https URL as a client id (a client metadata document; not fetched here).

Usage: oauth_server.py [legacy|foreign-issuer]. `legacy`: a server of the 2025-03-26 revision,
no protected resource metadata, its authorization server's metadata at the root naming the
issuer `<base>/oauth`; `foreign-issuer`: the same issuer, but with protected resource metadata
(so RFC 8414's issuer rule applies). Listens on a free port of 127.0.0.1 and prints `PORT <n>`; then prints a
line for each event the test waits on: `REGISTERED`, `AUTHORIZED`, `TOKEN`, `REFRESHED`,
`REFUSED` (a request to /mcp without a valid token), `CALLED <token-generation>`; and
`CLIENT <client id>` before `AUTHORIZED`; `GRANTED <scope>` for a client credentials grant
(the pre-registered client only). It also plays an enterprise IdP (issuer `<base>/idp`, token
endpoint `/idp/token`, client `kin-at-idp`) that exchanges the ID token `ID_TOKEN` for an
identity assertion (ID-JAG) for the pre-registered client, printing `EXCHANGED`; its own /token
takes that assertion (JWT bearer grant), printing `ASSERTED`. A client `SIGNER_ID` acting for
itself authenticates with an ES256 assertion signed by its own key (private_key_jwt), checked
against the key's public half, printing `SIGNED GRANT <scope>`; `signer-key PATH` on stdin
writes that private key (PKCS#8 PEM) to PATH and prints `SIGNER KEY`. A line
`expire` on stdin makes every access token given so far invalid (as their expiry would), and
prints `EXPIRED`. Tools: `echo(text)`, and `note(text)`, which needs the scope `docs:write`
besides `docs`: a call with a token without it is refused with 403 `insufficient_scope` (and
`STEP-UP` is printed); the scope kin asks for at /authorize is printed as `SCOPE <scope>`.
"""

import asyncio
import base64
import hashlib
import json
import re
import secrets
import socket
import sys
import threading
import time
from urllib.parse import parse_qs, urlencode

import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from mcp.server.mcpserver import MCPServer

server = MCPServer("kin-test-oauth")


@server.tool()
def echo(text: str) -> str:
    """Says the text back."""
    return f"echo: {text}"


@server.tool()
def note(text: str) -> str:
    """Keeps a note (needs the scope docs:write)."""
    return f"noted: {text}"


inner = server.streamable_http_app()
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen(64)
port = sock.getsockname()[1]
base = f"http://127.0.0.1:{port}"
clients = {}  # client_id -> redirect_uris
codes = {}  # code -> (client_id, redirect_uri, challenge, scope)
access = {}  # access token -> (generation, scope)
refresh = {}  # refresh token -> (client_id, scope) (one use each: rotated)
generation = 0
MODE = sys.argv[1] if len(sys.argv) > 1 else ""
issuer = f"{base}/oauth" if MODE else base
PRE_ID, PRE_SECRET = "kin-test-client", "kin-test-secret-8d1f"
# A client that authenticates with an assertion signed by its own P-256 key (private_key_jwt).
SIGNER_ID = "kin-test-signer"
SIGNER_KEY = ec.generate_private_key(ec.SECP256R1())
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ID_TOKEN = "kin-test-id-token-5c2e"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def b64(data):
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def id_jag():
    """An identity assertion for the pre-registered client (signed in name only: kin checks
    its shape and claims, the authorization server, here, its signature)."""
    now = int(time.time())
    claims = {"iss": f"{base}/idp", "sub": "ada", "aud": issuer, "client_id": PRE_ID,
              "jti": secrets.token_urlsafe(8), "iat": now, "exp": now + 300,
              "resource": f"{base}/mcp", "scope": "docs"}
    return f'{b64({"alg": "ES256", "typ": "oauth-id-jag+jwt"})}.{b64(claims)}.c2ln'


def without_port(redirect):
    """A loopback redirect matches whatever its port (RFC 8252, 7.3)."""
    return re.sub(r"^http://127\.0\.0\.1:\d+/", "http://127.0.0.1/", redirect or "")


def known(client_id, redirect):
    """A registered client's redirect, or any loopback one for the pre-registered and URL ids."""
    if client_id in clients:
        return without_port(redirect) in map(without_port, clients[client_id])
    loopback = (redirect or "").startswith("http://127.0.0.1:")
    return loopback and (client_id == PRE_ID or (client_id or "").startswith("https://"))


def authenticated(client_id, headers):
    """The pre-registered client must send its secret (client_secret_basic); others none."""
    if client_id != PRE_ID:
        return True
    sent = headers.get(b"authorization", b"").decode()
    expected = base64.b64encode(f"{PRE_ID}:{PRE_SECRET}".encode()).decode()
    return sent == f"Basic {expected}"


def tell(line):
    print(line, flush=True)


def issue(client_id, scope):
    global generation
    generation += 1
    token, renew = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    access[token] = (generation, scope)
    refresh[renew] = (client_id, scope)
    return {"access_token": token, "token_type": "Bearer", "expires_in": 3600,
            "refresh_token": renew, "scope": scope}


async def body_of(receive):
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def reply(send, status, payload=None, headers=()):
    data = b"" if payload is None else json.dumps(payload).encode()
    head = [(b"content-type", b"application/json")] + [(k.encode(), v.encode()) for k, v in headers]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": data})


async def app(scope, receive, send):
    if scope["type"] != "http":
        return await inner(scope, receive, send)
    path, method = scope["path"], scope["method"]
    query = parse_qs(scope.get("query_string", b"").decode())
    one = lambda q, k: (q.get(k) or [None])[0]
    if path.startswith("/.well-known/oauth-protected-resource") and MODE != "legacy":
        return await reply(send, 200, {"resource": f"{base}/mcp", "authorization_servers": [base],
                                       "scopes_supported": ["docs"]})
    if path == "/.well-known/oauth-authorization-server":
        return await reply(send, 200, {
            "issuer": issuer, "authorization_endpoint": f"{base}/authorize",
            "token_endpoint": f"{base}/token", "registration_endpoint": f"{base}/register",
            "response_types_supported": ["code"], "scopes_supported": ["docs", "docs:write"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials",
                                      JWT_BEARER],
            "code_challenge_methods_supported": ["S256"],
            "client_id_metadata_document_supported": True,
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"]})
    if path.startswith("/.well-known/"):
        return await reply(send, 404, {"error": "not_found"})
    if path == "/register" and method == "POST":
        meta = json.loads(await body_of(receive))
        client_id = secrets.token_urlsafe(8)
        clients[client_id] = meta.get("redirect_uris", [])
        tell("REGISTERED")
        return await reply(send, 201, {"client_id": client_id, "redirect_uris": clients[client_id],
                                       "token_endpoint_auth_method": "none",
                                       "grant_types": ["authorization_code", "refresh_token"],
                                       "response_types": ["code"]})
    if path == "/authorize":
        client_id, redirect = one(query, "client_id"), one(query, "redirect_uri")
        if (not known(client_id, redirect)
                or one(query, "code_challenge_method") != "S256" or not one(query, "code_challenge")
                or one(query, "resource") not in (f"{base}/mcp", None if MODE == "legacy" else "")):
            return await reply(send, 400, {"error": "invalid_request"})
        code = secrets.token_urlsafe(16)
        scope_asked = one(query, "scope") or "docs"
        codes[code] = (client_id, redirect, one(query, "code_challenge"), scope_asked)
        tell(f"CLIENT {client_id}")
        tell(f"SCOPE {scope_asked}")
        tell("AUTHORIZED")
        target = redirect + "?" + urlencode({"code": code, "state": one(query, "state"), "iss": issuer})
        await send({"type": "http.response.start", "status": 302,
                    "headers": [(b"location", target.encode())]})
        return await send({"type": "http.response.body", "body": b""})
    if path == "/idp/token" and method == "POST":
        form = parse_qs((await body_of(receive)).decode())
        if (one(form, "grant_type") != TOKEN_EXCHANGE or one(form, "subject_token") != ID_TOKEN
                or one(form, "client_id") != "kin-at-idp" or one(form, "audience") != issuer
                or one(form, "resource") != f"{base}/mcp"
                or one(form, "requested_token_type") != "urn:ietf:params:oauth:token-type:id-jag"):
            return await reply(send, 400, {"error": "invalid_grant"})
        tell("EXCHANGED")
        return await reply(send, 200, {"access_token": id_jag(), "token_type": "N_A",
                                       "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag"})
    if path == "/token" and method == "POST":
        form = parse_qs((await body_of(receive)).decode())
        grant = one(form, "grant_type")
        headers = dict(scope["headers"])
        if not one(form, "client_id") and headers.get(b"authorization", b"").startswith(b"Basic "):
            # client_secret_basic: the id comes in the header.
            form["client_id"] = [base64.b64decode(headers[b"authorization"][6:]).decode().split(":")[0]]
        if not authenticated(one(form, "client_id"), headers):
            return await reply(send, 401, {"error": "invalid_client"})
        if grant == "authorization_code":
            found = codes.pop(one(form, "code"), None)
            verifier = one(form, "code_verifier") or ""
            digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            if (found is None or found[0] != one(form, "client_id") or found[1] != one(form, "redirect_uri")
                    or found[2] != digest):
                return await reply(send, 400, {"error": "invalid_grant"})
            tell("TOKEN")
            return await reply(send, 200, issue(found[0], found[3]))
        if grant == "refresh_token":
            client_id, scope_granted = refresh.pop(one(form, "refresh_token"), (None, None))
            if client_id is None or client_id != one(form, "client_id"):
                return await reply(send, 400, {"error": "invalid_grant"})
            tell("REFRESHED")
            return await reply(send, 200, issue(client_id, scope_granted))
        if grant == JWT_BEARER and one(form, "client_id") == PRE_ID:
            claims = (one(form, "assertion") or "..").split(".")[1]
            claims = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
            if claims.get("client_id") != PRE_ID or claims.get("iss") != f"{base}/idp":
                return await reply(send, 400, {"error": "invalid_grant"})
            tell("ASSERTED")
            answer = issue(PRE_ID, "docs")
            del answer["refresh_token"]
            return await reply(send, 200, answer)
        if grant == "client_credentials" and one(form, "client_id") == SIGNER_ID:
            try:
                claims = jwt.decode(one(form, "client_assertion") or "", SIGNER_KEY.public_key(),
                                    algorithms=["ES256"], audience=issuer)
            except jwt.InvalidTokenError as error:
                tell(f"BAD ASSERTION {error}")
                return await reply(send, 401, {"error": "invalid_client"})
            if (one(form, "client_assertion_type") != ASSERTION_TYPE
                    or claims.get("iss") != SIGNER_ID or claims.get("sub") != SIGNER_ID):
                return await reply(send, 401, {"error": "invalid_client"})
            granted = one(form, "scope") or "docs"
            tell(f"SIGNED GRANT {granted}")
            answer = issue(SIGNER_ID, granted)
            del answer["refresh_token"]
            return await reply(send, 200, answer)
        if grant == "client_credentials" and one(form, "client_id") == PRE_ID:
            granted = one(form, "scope") or "docs"
            tell(f"GRANTED {granted}")
            answer = issue(PRE_ID, granted)
            del answer["refresh_token"]
            return await reply(send, 200, answer)
        return await reply(send, 400, {"error": "unsupported_grant_type"})
    if path.startswith("/mcp"):
        auth = dict(scope["headers"]).get(b"authorization", b"").decode()
        token = auth[7:] if auth.startswith("Bearer ") else None
        if token not in access:
            tell("REFUSED")
            challenge = f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp", scope="docs"'
            if MODE == "legacy":
                challenge = 'Bearer error="invalid_token"'
            return await reply(send, 401, {"error": "invalid_token"}, [("www-authenticate", challenge)])
        if method != "POST":
            return await inner(scope, receive, send)
        generation_of, granted = access[token]
        body = await body_of(receive)
        message = json.loads(body or b"{}")
        params = message.get("params") if isinstance(message, dict) else None
        tool = (params or {}).get("name")
        if message.get("method") == "tools/call" and tool == "note" and "docs:write" not in granted.split():
            tell("STEP-UP")
            challenge = (f'Bearer error="insufficient_scope", scope="docs docs:write", '
                         f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"')
            return await reply(send, 403, {"error": "insufficient_scope"}, [("www-authenticate", challenge)])
        tell(f"CALLED {generation_of}")
        sent = False

        async def replay():
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await inner(scope, replay, send)
    return await reply(send, 404, {"error": "not_found"})


def commands(loop):
    for line in sys.stdin:
        if line.strip() == "expire":
            loop.call_soon_threadsafe(lambda: (access.clear(), tell("EXPIRED")))
        if line.startswith("signer-key "):
            # The signing client's private key, written where the test keeps its config.
            with open(line.split(" ", 1)[1].strip(), "wb") as out:
                out.write(SIGNER_KEY.private_bytes(serialization.Encoding.PEM,
                                                   serialization.PrivateFormat.PKCS8,
                                                   serialization.NoEncryption()))
            tell("SIGNER KEY")


async def main():
    threading.Thread(target=commands, args=(asyncio.get_running_loop(),), daemon=True).start()
    tell(f"PORT {port}")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


asyncio.run(main())
