#!/usr/bin/env python3
"""Drive `kin acp` with the official ACP Python SDK (`agent-client-protocol`, import `acp`).

Usage: python_sdk_client.py KIN_BINARY REPLAY_DIR WORKSPACE KIN_HOME

REPLAY_DIR, WORKSPACE and KIN_HOME must be existing directories; WORKSPACE must be
absolute. This script writes the replay model script (REPLAY_DIR/session.jsonl) itself,
so the expected texts live in one place, then spawns `KIN_BINARY acp --replay REPLAY_DIR`
with KIN_HOME set, and walks one session through its whole life: initialize, new, prompt,
prompt + cancel, list, close, load, close, resume, prompt, delete, list.

Prints `python sdk interop: ok` and exits 0 on success; exits 1 with a message otherwise.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import acp
from acp import RequestError, text_block
from acp.connection import StreamDirection, StreamEvent
from acp.meta import AGENT_METHODS
from acp.schema import (
    AllowedOutcome,
    DeleteSessionRequest,
    DeleteSessionResponse,
    DeniedOutcome,
    RequestPermissionResponse,
)
from acp.utils import request_model_from_dict

SDK_VERSION = "0.12.1"
# Generous: every step is local and the model is a replay, so this only turns a hang into
# a readable failure instead of a stuck test.
STEP_TIMEOUT = 30.0

FIRST_PROMPT = "Reply with ONE"
FIRST_REPLY = "ONE"
HANG_PROMPT = "Write a very long essay."
HANG_PARTIAL = "Starting a long answer"
LAST_PROMPT = "Reply with THREE"
LAST_REPLY = "THREE"


class InteropFailure(Exception):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise InteropFailure(message)


# --- the replay model script -------------------------------------------------------------


def write_replay_script(replay_dir: str) -> None:
    """One script, three model calls: a finished reply, a reply cut off (it streams its
    first chunks and then waits to be cancelled), and a finished reply after resume."""
    lines: list[dict[str, Any]] = [
        {
            "type": "session",
            "version": 0,
            "id": "python-sdk-interop",
            "createdAt": 0,
            "delegationDepth": 0,
        }
    ]
    seq = 0

    def chunk(turn: int, chunk: dict[str, Any]) -> None:
        nonlocal seq
        lines.append(
            {
                "type": "assistant/chunk",
                "seq": seq,
                "time": 0,
                "data": {"turn": turn, "step": 1, "chunk": chunk},
            }
        )
        seq += 1

    def finished_reply(turn: int, parts: list[str]) -> None:
        chunk(turn, {"type": "block-start", "index": 0, "blockType": "text"})
        for part in parts:
            chunk(turn, {"type": "text-delta", "index": 0, "text": part})
        text = "".join(parts)
        chunk(turn, {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}})
        chunk(turn, {"type": "usage", "usage": {"inputTokens": 100, "outputTokens": 10}})
        chunk(turn, {"type": "finish", "reason": {"kind": "stop"}})

    # Turn 1: streamed in two pieces, so the client has to join chunks.
    finished_reply(1, [FIRST_REPLY[:1], FIRST_REPLY[1:]])
    # Turn 2: no `finish` and no errored turn/end -> the replay model hangs after this chunk.
    chunk(2, {"type": "block-start", "index": 0, "blockType": "text"})
    chunk(2, {"type": "text-delta", "index": 0, "text": HANG_PARTIAL})
    # Turn 3: the prompt after resume.
    finished_reply(3, [LAST_REPLY])

    with open(os.path.join(replay_dir, "session.jsonl"), "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")


# --- the client ----------------------------------------------------------------------------


class RecordingClient:
    """An `acp.Client`: records every session update, approves every permission request."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.first_update = asyncio.Event()
        self.permission_requests: list[Any] = []

    def on_connect(self, conn: Any) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.first_update.set()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append((session_id, tool_call, options))
        if not options:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=options[0].option_id)
        )

    # kin is told (clientCapabilities default to false) that this client has no fs and
    # no terminal, so it must not call these; answer "method not found" if it does.
    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        raise RequestError.method_not_found(acp.CLIENT_METHODS["fs_write_text_file"])

    async def read_text_file(self, session_id: str, path: str, **kwargs: Any) -> Any:
        raise RequestError.method_not_found(acp.CLIENT_METHODS["fs_read_text_file"])

    async def create_terminal(self, session_id: str, command: str, **kwargs: Any) -> Any:
        raise RequestError.method_not_found(acp.CLIENT_METHODS["terminal_create"])

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        raise RequestError.method_not_found(acp.CLIENT_METHODS["terminal_output"])

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        raise RequestError.method_not_found(acp.CLIENT_METHODS["terminal_release"])

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        raise RequestError.method_not_found(acp.CLIENT_METHODS["terminal_wait_for_exit"])

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        raise RequestError.method_not_found(acp.CLIENT_METHODS["terminal_kill"])

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        pass


class Wire:
    """Every raw JSON-RPC message in both directions, in the order the SDK saw them."""

    def __init__(self) -> None:
        self.messages: list[tuple[StreamDirection, dict[str, Any]]] = []

    def __call__(self, event: StreamEvent) -> None:
        self.messages.append((event.direction, event.message))

    def mark(self) -> int:
        return len(self.messages)

    def incoming_since(self, mark: int) -> list[dict[str, Any]]:
        return [m for d, m in self.messages[mark:] if d == StreamDirection.INCOMING]

    def request_id(self, mark: int, method: str) -> Any:
        for d, m in self.messages[mark:]:
            if d == StreamDirection.OUTGOING and m.get("method") == method and "id" in m:
                return m["id"]
        raise InteropFailure(f"no outgoing {method} request was recorded on the wire")

    def dump(self, mark: int = 0) -> str:
        return "\n".join(
            f"  {'->' if d == StreamDirection.OUTGOING else '<-'} {json.dumps(m)}"
            for d, m in self.messages[mark:]
        )


def kind(update: Any) -> str:
    return getattr(update, "session_update", type(update).__name__)


def text_of(update: Any) -> str | None:
    content = getattr(update, "content", None)
    return getattr(content, "text", None)


def agent_text(updates: list[tuple[str, Any]], session_id: str) -> str:
    return "".join(
        text_of(u) or ""
        for sid, u in updates
        if sid == session_id and kind(u) == "agent_message_chunk"
    )


def describe(updates: list[tuple[str, Any]]) -> str:
    return "[" + ", ".join(f"{kind(u)}:{text_of(u)!r}" for _, u in updates) + "]"


async def step(name: str, awaitable: Any) -> Any:
    try:
        return await asyncio.wait_for(awaitable, STEP_TIMEOUT)
    except asyncio.TimeoutError:
        raise InteropFailure(f"{name}: no answer from kin within {STEP_TIMEOUT}s") from None
    except RequestError as error:
        raise InteropFailure(
            f"{name}: kin answered with JSON-RPC error {error.code}: {error} (data: {error.data!r})"
        ) from None


async def delete_session(conn: Any, session_id: str) -> Any:
    """`session/delete` is in the SDK's schema (DeleteSessionRequest/Response, AGENT_METHODS)
    but ClientSideConnection 0.12.1 has no method for it; send it through the SDK's own
    connection and models, exactly as its other session methods do."""
    if hasattr(conn, "delete_session"):
        return await conn.delete_session(session_id=session_id)
    return await request_model_from_dict(
        conn._conn,
        AGENT_METHODS["session_delete"],
        DeleteSessionRequest(session_id=session_id),
        DeleteSessionResponse,
    )


async def listed(conn: Any, wire: Wire, name: str) -> tuple[dict[str, Any], list[Any]]:
    """session/list through the SDK, plus the raw result (the SDK silently drops entries it
    cannot parse, so a malformed entry would otherwise look like a missing one)."""
    mark = wire.mark()
    response = await step(name, conn.list_sessions())
    rid = wire.request_id(mark, "session/list")
    raw = next(
        (m for m in wire.incoming_since(mark) if m.get("id") == rid and "method" not in m), None
    )
    check(raw is not None and "result" in raw, f"{name}: no raw session/list result on the wire")
    raw_sessions = raw["result"].get("sessions")
    check(isinstance(raw_sessions, list), f"{name}: result.sessions is not a list: {raw['result']!r}")
    check(
        len(raw_sessions) == len(response.sessions),
        f"{name}: the SDK dropped session/list entries it could not parse: raw {raw_sessions!r}, "
        f"parsed {response.sessions!r}",
    )
    return raw["result"], response.sessions


# --- the walk ------------------------------------------------------------------------------


async def run(kin: str, replay_dir: str, workspace: str, kin_home: str) -> None:
    client = RecordingClient()
    wire = Wire()
    env = {"KIN_HOME": kin_home, "RUST_BACKTRACE": "1"}
    async with acp.spawn_agent_process(
        client,
        kin,
        "acp",
        "--replay",
        replay_dir,
        env=env,
        cwd=workspace,
        # kin's stderr goes to ours: an unread pipe could fill up and stall kin.
        transport_kwargs={"stderr": None},
        observers=[wire],
    ) as (conn, process):
        # 1. initialize
        init = await step("initialize", conn.initialize(protocol_version=acp.PROTOCOL_VERSION))
        check(
            init.protocol_version == 1,
            f"initialize: expected protocolVersion 1, got {init.protocol_version}",
        )
        caps = init.agent_capabilities
        check(caps is not None, "initialize: no agentCapabilities")
        check(caps.load_session is True, f"initialize: agentCapabilities.loadSession is {caps.load_session!r}, expected true")
        sc = caps.session_capabilities
        check(sc is not None, "initialize: no agentCapabilities.sessionCapabilities")
        for name in ("list", "resume", "close", "delete"):
            check(
                getattr(sc, name) is not None,
                f"initialize: sessionCapabilities.{name} is missing (got {sc.model_dump(by_alias=True)!r})",
            )

        # 2. session/new
        new = await step("session/new", conn.new_session(cwd=workspace, mcp_servers=[]))
        sid = new.session_id
        check(isinstance(sid, str) and sid != "", f"session/new: bad sessionId {sid!r}")

        # 3. a plain prompt
        mark = len(client.updates)
        response = await step(
            "session/prompt (first)", conn.prompt(session_id=sid, prompt=[text_block(FIRST_PROMPT)])
        )
        check(
            response.stop_reason == "end_turn",
            f"session/prompt (first): stopReason {response.stop_reason!r}, expected 'end_turn'",
        )
        got = agent_text(client.updates[mark:], sid)
        check(
            got == FIRST_REPLY,
            f"session/prompt (first): agent_message_chunk text {got!r}, expected {FIRST_REPLY!r}; "
            f"updates {describe(client.updates[mark:])}",
        )
        foreign = [s for s, _ in client.updates if s != sid]
        check(not foreign, f"session/update for unknown sessions {foreign!r}")

        # 4. a prompt the model never finishes, cancelled once its first update arrives
        mark = len(client.updates)
        client.first_update.clear()
        pending = asyncio.create_task(
            conn.prompt(session_id=sid, prompt=[text_block(HANG_PROMPT)])
        )
        waiter = asyncio.create_task(client.first_update.wait())
        done, _ = await asyncio.wait(
            {pending, waiter}, timeout=STEP_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
        )
        if pending in done:
            waiter.cancel()
            result = pending.result() if pending.exception() is None else pending.exception()
            raise InteropFailure(
                f"session/prompt (to cancel): answered before any update and before cancel: {result!r}"
            )
        if waiter not in done:
            pending.cancel()
            raise InteropFailure("session/prompt (to cancel): no session/update within the timeout")
        await conn.cancel(session_id=sid)
        response = await step("session/prompt (cancelled)", pending)
        check(
            response.stop_reason == "cancelled",
            f"session/prompt (cancelled): stopReason {response.stop_reason!r}, expected 'cancelled'",
        )
        got = agent_text(client.updates[mark:], sid)
        check(
            got == HANG_PARTIAL,
            f"session/prompt (cancelled): streamed text {got!r}, expected {HANG_PARTIAL!r}",
        )

        # 5. session/list shows it, with a title
        _, sessions = await listed(conn, wire, "session/list")
        ours = [s for s in sessions if s.session_id == sid]
        check(len(ours) == 1, f"session/list: expected session {sid} once, got {[s.session_id for s in sessions]!r}")
        info = ours[0]
        check(
            isinstance(info.title, str) and info.title.strip() != "",
            f"session/list: session {sid} has no title ({info.model_dump(by_alias=True)!r})",
        )
        check(info.cwd == workspace, f"session/list: cwd {info.cwd!r}, expected {workspace!r}")

        # 6. session/close
        await step("session/close", conn.close_session(session_id=sid))

        # 7. session/load replays the conversation before answering
        mark = len(client.updates)
        wire_mark = wire.mark()
        await step("session/load", conn.load_session(cwd=workspace, session_id=sid, mcp_servers=[]))
        # What the SDK's user saw by the time load_session returned:
        replayed = client.updates[mark:]
        check(
            all(s == sid for s, _ in replayed),
            f"session/load: updates for other sessions: {[s for s, _ in replayed if s != sid]!r}",
        )
        user_texts = [text_of(u) for _, u in replayed if kind(u) == "user_message_chunk"]
        check(
            FIRST_PROMPT in user_texts and HANG_PROMPT in user_texts,
            f"session/load: expected user_message_chunk updates for {FIRST_PROMPT!r} and {HANG_PROMPT!r} "
            f"before the response; got {describe(replayed)}",
        )
        replayed_agent = agent_text(replayed, sid)
        check(
            FIRST_REPLY in replayed_agent,
            f"session/load: expected agent_message_chunk text {FIRST_REPLY!r} before the response; "
            f"got {describe(replayed)}",
        )
        # The conversation, consecutive chunks of one kind joined: the first exchange, then
        # the second prompt (what kin replays of the cancelled reply is its own business).
        history: list[tuple[str, str]] = []
        for _, u in replayed:
            if kind(u) not in ("user_message_chunk", "agent_message_chunk"):
                continue
            if history and history[-1][0] == kind(u):
                history[-1] = (kind(u), history[-1][1] + (text_of(u) or ""))
            else:
                history.append((kind(u), text_of(u) or ""))
        check(
            history[:3]
            == [
                ("user_message_chunk", FIRST_PROMPT),
                ("agent_message_chunk", FIRST_REPLY),
                ("user_message_chunk", HANG_PROMPT),
            ],
            f"session/load: history out of order or incomplete: {history!r}",
        )
        # And on the wire: every replayed session/update precedes the session/load response.
        load_id = wire.request_id(wire_mark, "session/load")
        incoming = wire.incoming_since(wire_mark)
        answer_at = next(
            (i for i, m in enumerate(incoming) if m.get("id") == load_id and "method" not in m), None
        )
        check(answer_at is not None, "session/load: no response on the wire")
        late = [m for m in incoming[answer_at + 1 :] if m.get("method") == "session/update"]
        check(
            not late,
            "session/load: session/update notifications arrived AFTER the load response:\n"
            + wire.dump(wire_mark),
        )
        check(answer_at > 0, "session/load: the response came with no replayed history:\n" + wire.dump(wire_mark))

        # 8. close again, then session/resume: reopened without replaying the conversation (the
        # session's current state, such as its slash commands, may be announced)
        await step("session/close (before resume)", conn.close_session(session_id=sid))
        mark = len(client.updates)
        wire_mark = wire.mark()
        await step("session/resume", conn.resume_session(session_id=sid, cwd=workspace, mcp_servers=[]))
        conversation = ("user_message_chunk", "agent_message_chunk", "agent_thought_chunk",
                        "tool_call", "tool_call_update", "plan")
        replayed = [(s, u) for s, u in client.updates[mark:] if kind(u) in conversation]
        check(
            not replayed,
            f"session/resume: replayed updates {describe(replayed)}, expected none",
        )

        # 9. a prompt after resume
        response = await step(
            "session/prompt (after resume)",
            conn.prompt(session_id=sid, prompt=[text_block(LAST_PROMPT)]),
        )
        check(
            response.stop_reason == "end_turn",
            f"session/prompt (after resume): stopReason {response.stop_reason!r}, expected 'end_turn'",
        )
        after = client.updates[mark:]
        got = agent_text(after, sid)
        check(
            got == LAST_REPLY,
            f"session/prompt (after resume): text {got!r}, expected {LAST_REPLY!r}; updates {describe(after)}",
        )
        check(
            not [u for _, u in after if kind(u) == "user_message_chunk"],
            f"session/resume: history was replayed (user_message_chunk seen): {describe(after)}",
        )
        late = [m for m in wire.incoming_since(wire_mark) if m.get("method") == "session/update"
                and (m.get("params") or {}).get("update", {}).get("sessionUpdate") == "user_message_chunk"]
        check(not late, f"session/resume: user_message_chunk on the wire after resume: {late!r}")

        # 10. session/delete, then it is gone
        await step("session/delete", delete_session(conn, sid))
        _, sessions = await listed(conn, wire, "session/list (after delete)")
        check(
            sid not in [s.session_id for s in sessions],
            f"session/list (after delete): session {sid} is still listed",
        )
        try:
            await asyncio.wait_for(
                conn.load_session(cwd=workspace, session_id=sid, mcp_servers=[]), STEP_TIMEOUT
            )
        except RequestError:
            pass
        else:
            raise InteropFailure(f"session/load (after delete): loading deleted session {sid} succeeded")

        check(
            not client.permission_requests,
            f"unexpected session/request_permission calls: {client.permission_requests!r}",
        )

    # Leaving the context closes kin's stdin; the SDK waits 2s, then terminates it.
    check(
        process.returncode == 0,
        f"kin did not exit cleanly on stdin EOF (exit status {process.returncode})",
    )


def main(argv: list[str]) -> int:
    if len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    kin, replay_dir, workspace, kin_home = argv[1:]
    for name, path in (("replay dir", replay_dir), ("workspace", workspace), ("KIN_HOME", kin_home)):
        if not os.path.isdir(path):
            print(f"python sdk interop: {name} {path!r} is not an existing directory", file=sys.stderr)
            return 2
    if not os.path.isabs(workspace):
        print(f"python sdk interop: workspace {workspace!r} must be absolute", file=sys.stderr)
        return 2
    try:
        from importlib.metadata import version

        installed = version("agent-client-protocol")
    except Exception:  # noqa: BLE001
        installed = "unknown"
    if installed != SDK_VERSION:
        print(
            f"python sdk interop: note: agent-client-protocol {installed} installed; "
            f"this script was written against {SDK_VERSION}",
            file=sys.stderr,
        )
    write_replay_script(replay_dir)
    try:
        asyncio.run(run(kin, replay_dir, workspace, kin_home))
    except InteropFailure as failure:
        print(f"python sdk interop: FAILED: {failure}", file=sys.stderr)
        return 1
    print("python sdk interop: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
