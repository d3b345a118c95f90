#!/usr/bin/env python3
"""Checks a Linux release archive of kin the way a registry client uses it.

    dist/check-archive.py target/distrib/kin-x86_64-unknown-linux-gnu.tar.gz

Unpacks it into an empty directory and runs its `cmd args` from the registry entry
(dist/registry/kin/agent.json) in a fresh HOME:
  - the registry's handshake check (the validator's `initialize`) offers the terminal method;
  - with a model endpoint (a small local stand-in), a prompt is answered; the time from the
    start of the unpacking to that answer is printed;
  - `kin demo` runs;
  - the binary needs no shared library but glibc's (and libgcc_s, which every glibc system
    has), no glibc symbol version above --max-glibc (2.31), and no GLIBC_ABI_DT_RELR.
Exits non-zero on the first failed check.
"""

import argparse
import http.server
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GLIBC_LIBS = {
    "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1",
    "libutil.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "libgcc_s.so.1",
}


def fail(message: str) -> None:
    sys.exit(f"check-archive: FAILED: {message}")


class Model(http.server.BaseHTTPRequestHandler):
    """Answers every chat completion with one streamed sentence."""

    def do_POST(self) -> None:  # noqa: N802 (the http.server spelling)
        self.rfile.read(int(self.headers.get("content-length", 0)))
        chunk = {"choices": [{"index": 0, "delta": {"content": "answered"}, "finish_reason": None}]}
        end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        body = f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


class Agent:
    """`cmd args` over pipes, one JSON-RPC line at a time."""

    def __init__(self, command: list[str], cwd: Path, env: dict[str, str]):
        self.proc = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, bufsize=1,
        )

    def request(self, id_: int, method: str, params: dict) -> dict:
        message = {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                fail(f"{method}: kin closed stdout; stderr: {self.proc.stderr.read()[-500:]}")
            answer = json.loads(line)
            if answer.get("id") == id_ and "method" not in answer:
                return answer

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KIN_", "XDG_"))}
    for name in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "RUST_LOG"):
        env.pop(name, None)
    env.update(HOME=str(home), TERM="dumb")
    return env


def glibc_versions(binary: Path) -> list[str]:
    text = subprocess.run(["readelf", "-V", "--wide", str(binary)], capture_output=True,
                          text=True, check=True).stdout
    return sorted(set(re.findall(r"Name: (GLIBC_[A-Z_0-9.]+)", text)))


def needed(binary: Path) -> list[str]:
    text = subprocess.run(["readelf", "-d", "--wide", str(binary)], capture_output=True,
                          text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--platform", default="linux-x86_64")
    parser.add_argument("--max-glibc", default="2.31")
    args = parser.parse_args()
    entry = json.loads((ROOT / "dist/registry/kin/agent.json").read_text())
    target = entry["distribution"]["binary"][args.platform]
    size = args.archive.stat().st_size
    print(f"archive: {args.archive.name}, {size} bytes ({size / 1e6:.1f} MB)")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"

    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        unpacked, home, work = scratch / "extracted", scratch / "home", scratch / "work"
        for directory in (unpacked, home, work):
            directory.mkdir()

        # Unpack, start, sign in (as the editor's environment would have it), first prompt.
        started = time.monotonic()
        with tarfile.open(args.archive) as tar:
            tar.extractall(unpacked, filter="data")
        binary = unpacked / target["cmd"]
        env = clean_env(home) | {"KIN_BASE_URL": base_url, "KIN_API_KEY": "sk-check", "KIN_MODEL": "m"}
        agent = Agent([str(binary), *target.get("args", [])], unpacked, env)
        agent.request(0, "initialize", {"protocolVersion": 1})
        session = agent.request(1, "session/new", {"cwd": str(work), "mcpServers": []})
        sid = session["result"]["sessionId"]
        answer = agent.request(2, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
        elapsed = time.monotonic() - started
        agent.close()
        if answer.get("result", {}).get("stopReason") != "end_turn":
            fail(f"the prompt was not answered: {answer}")
        print(f"unpack to first answered prompt: {elapsed * 1000:.0f} ms")

        # The registry's handshake check, in a HOME of its own and no key anywhere.
        fresh = scratch / "fresh-home"
        fresh.mkdir()
        agent = Agent([str(binary), *target.get("args", [])], unpacked, clean_env(fresh))
        init = agent.request(1, "initialize", {
            "protocolVersion": 1,
            "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"},
            "clientCapabilities": {
                "terminal": True,
                "fs": {"readTextFile": True, "writeTextFile": True},
                "_meta": {"terminal_output": True, "terminal-auth": True},
            },
        })
        agent.close()
        if "error" in init:
            fail(f"initialize: {init['error']}")
        methods = init["result"].get("authMethods", [])
        terminal = [m for m in methods if m.get("type") == "terminal"]
        if not terminal or terminal[0].get("args") != ["login"]:
            fail(f"no terminal auth method running `login`: {methods}")
        print(f"handshake: auth methods {[(m['id'], m.get('type', 'agent')) for m in methods]}")

        demo = subprocess.run([str(binary), "demo"], cwd=unpacked, env=clean_env(fresh),
                              capture_output=True, text=True, timeout=120)
        if demo.returncode != 0:
            fail(f"kin demo exited {demo.returncode}: {demo.stderr[-500:]}")
        print(f"demo: ran ({len(demo.stdout.splitlines())} lines)")

        libraries = needed(binary)
        extra = [lib for lib in libraries if lib not in GLIBC_LIBS]
        if extra:
            fail(f"needs libraries beyond glibc: {extra}")
        versions = glibc_versions(binary)
        floor = tuple(int(p) for p in args.max_glibc.split("."))
        too_new = [v for v in versions
                   if v == "GLIBC_ABI_DT_RELR"
                   or (v[6:].replace(".", "").isdigit()
                       and tuple(int(p) for p in v[6:].split(".")) > floor)]
        if too_new:
            fail(f"needs glibc versions above {args.max_glibc}: {too_new}")
        newest = max((v for v in versions if v[6:].replace(".", "").isdigit()),
                     key=lambda v: tuple(int(p) for p in v[6:].split(".")))
        print(f"libraries: {', '.join(libraries)}; newest glibc symbol version: {newest}")
    print("check-archive: OK")


if __name__ == "__main__":
    main()
