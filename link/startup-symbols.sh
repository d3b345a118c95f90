#!/usr/bin/env bash
# Regenerates link/startup-symbols.txt: the functions a release kin runs from exec to its first
# answers, found by running it under valgrind's callgrind. build.rs hands the list to the
# linker, which places those functions side by side (see build.rs for why). Needs valgrind and
# binutils. The scenarios are the process starts kin pays for again and again:
# - `kin acp` through `initialize` and `session/new` (no key, and with an https endpoint and a
#   key): an editor opening kin;
# - `kin acp --replay` through a whole prompt: an ACP child of kin, start to answer;
# - `kin mcp` through `initialize` and `tools/list`: a parent agent starting kin as an MCP server;
# - `kin __guard true`: the guard kin starts each command and child agent under.
#
# Run it after upgrading the toolchain or dependencies, or after larger code changes (symbol
# names change with them: stale names are ignored by the linker, so an old list only loses its
# effect, it never breaks the build) and commit the result; `cargo bench --bench idle_rss` and
# `--bench startup` show the drift.
#
# Two builds of kin are traced: `cargo build --release`, and the one `cargo bench` builds. The
# benches enable the dev-dependencies' features (the schema crate's `schemars`), which changes
# the hash in most of kin's symbol names, so each build finds only its own names in the list.
set -euo pipefail
cd "$(dirname "$0")/.."

kin=$PWD/target/release/kin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Runs kin under callgrind and talks to it as a client would: sends each of "${messages[@]}"
# once kin has answered the one before (a message's `SESSION` becomes the session id kin last
# answered with), then closes stdin; the last answer must be a result.
# trace NAME [ENV=VALUE...] -- KIN-ARGS...
trace() {
    local name=$1
    shift
    local env=()
    while [ "$1" != "--" ]; do
        env+=("$1")
        shift
    done
    shift
    mkdir -p "$work/$name/home"
    mkfifo "$work/$name.in"
    (cd "$cwd" && env -u RUST_LOG KIN_HOME="$work/$name/home" "${env[@]}" \
        valgrind --quiet --tool=callgrind --demangle=no \
        --callgrind-out-file="$work/$name.callgrind" "$kin" "$@" \
        <"$work/$name.in" >"$work/$name.out") &
    local pid=$! to id="" session message
    exec {to}>"$work/$name.in"
    for message in "${messages[@]}"; do
        session=$(sed -nE 's/.*"sessionId":"([^"]+)".*/\1/p' "$work/$name.out" | tail -1)
        printf '%s\n' "${message//SESSION/$session}" >&"$to"
        id=$(sed -nE 's/^\{"jsonrpc":"2.0","id":([0-9]+),.*/\1/p' <<<"$message")
        [ -z "$id" ] && continue
        until grep -qE "\"id\":$id,\"(result|error)\"" "$work/$name.out"; do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
    done
    exec {to}>&-
    wait "$pid"
    grep -q "\"id\":$id,\"result\"" "$work/$name.out" || {
        echo "startup-symbols: kin did not answer request $id in scenario $name" >&2
        exit 1
    }
}
# The scenarios on the kin just built (`build` names it), and the functions that kin defines.
trace_build() {
    local build=$1
    cwd=$(mkdir -p "$work/cwd" && cd "$work/cwd" && pwd)
    local initialize='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'
    local new="{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/new\",\"params\":{\"cwd\":\"$cwd\",\"mcpServers\":[]}}"
    local prompt='{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"SESSION","prompt":[{"type":"text","text":"Answer."}]}}'
    messages=("$initialize" "$new")
    trace "$build-plain" -- acp
    trace "$build-https" KIN_BASE_URL=https://127.0.0.1:9/v1 KIN_API_KEY=sk-order-0000000000000000 -- acp
    messages=("$initialize" "$new" "$prompt")
    trace "$build-child" -- acp --replay "$replay"
    messages=(
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"order","version":"0"}}}'
        '{"jsonrpc":"2.0","method":"notifications/initialized"}'
        '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
    )
    trace "$build-mcp" -- mcp
    # The guard wants its lifeline as fd 3: an open pipe nobody writes. (valgrind lacks
    # pidfd_open, so the guard's spawn fails there: what it runs up to that point is traced.)
    (cd "$cwd" && valgrind --quiet --tool=callgrind --demangle=no \
        --callgrind-out-file="$work/$build-guard.callgrind" "$kin" __guard true \
        3< <(sleep 5) 2>/dev/null) || true
    nm --defined-only "$kin" | awk '$2 ~ /^[tTwW]$/ { print $3 }' >>"$work/defined.all"
}
# The replay model of the child scenario: one recorded answer.
replay=$work/replay
mkdir -p "$replay"
{
    echo '{"type":"session","version":0,"id":"00000000-0000-4000-8000-000000000000","createdAt":0,"cwd":"/","delegationDepth":0}'
    seq=0
    for chunk in '{"type":"block-start","index":0,"blockType":"text"}' \
        '{"type":"text-delta","index":0,"text":"OK"}' \
        '{"type":"block-end","index":0,"block":{"type":"text","text":"OK"}}' \
        '{"type":"finish","reason":{"kind":"stop"}}'; do
        echo "{\"type\":\"assistant/chunk\",\"seq\":$seq,\"time\":0,\"data\":{\"turn\":1,\"step\":1,\"chunk\":$chunk}}"
        seq=$((seq + 1))
    done
} >"$replay/session.jsonl"
cargo build --release --bin kin
trace_build release
cargo bench --no-run --bench startup
trace_build bench
sort -u "$work/defined.all" >"$work/defined"

# Function names callgrind saw, kept when they are functions of a kin binary.
{
    echo "# Functions kin runs from exec to its first answers: generated by"
    echo "# link/startup-symbols.sh (see there and build.rs); do not edit by hand."
    cat "$work"/*.callgrind | sed -nE 's/^c?fn=\([0-9]+\) (.+)$/\1/p' | sort -u |
        comm -12 - "$work/defined"
} >link/startup-symbols.txt
echo "startup-symbols: $(grep -vc '^#' link/startup-symbols.txt) functions in link/startup-symbols.txt"
