#!/usr/bin/env bash
# Builds the linux-x86_64 release archive on this machine, packed as dist packs it
# (target/distrib/kin-x86_64-unknown-linux-gnu.tar.gz holding kin-x86_64-unknown-linux-gnu/
# {kin,README.md}, with its .sha256), and the registry entry with that archive's hash
# (target/distrib/agent.json). The binary is linked by zig against glibc 2.31 (cargo-zigbuild
# and zig from PyPI, in a virtual environment under target/), so it runs on Ubuntu 20.04 and
# newer whatever this machine's glibc. Check the result with dist/check-archive.py.
set -euo pipefail
cd "$(dirname "$0")/.."

target=x86_64-unknown-linux-gnu
glibc=2.31
venv=target/dist-venv
if [ ! -x "$venv/bin/cargo-zigbuild" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check ziglang cargo-zigbuild
fi
export PATH="$PWD/$venv/bin:$PATH"
# cargo-zigbuild finds zig through this Python (the ziglang package).
export CARGO_ZIGBUILD_PYTHON_PATH="$PWD/$venv/bin/python3"

cargo zigbuild --locked --profile dist --target "$target.$glibc"

name="kin-$target"
out=target/distrib
rm -rf "${out:?}/$name" "$out/$name.tar.gz"
mkdir -p "$out/$name"
cp "target/$target/dist/kin" README.md "$out/$name/"
tar -C "$out" --owner=0 --group=0 --numeric-owner -czf "$out/$name.tar.gz" "$name"
rm -rf "${out:?}/$name"
(cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
python3 dist/registry/fill.py --archives "$out" --allow-missing --out "$out/agent.json"
ls -l "$out/$name.tar.gz"
