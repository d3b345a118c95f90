#!/usr/bin/env python3
"""Writes kin's ACP registry entry (dist/registry/kin/agent.json) from Cargo.toml.

The version, description, repository, authors and license come from Cargo.toml; each platform
points at the archive dist builds for it on the repository's release page of that version
(`<repository>/releases/download/v<version>/kin-<target>.tar.gz`), run as `kin acp`. With
--archives DIR, each platform's `sha256` is the hash of DIR/kin-<target>.tar.gz; every
platform's archive must be there unless --allow-missing (a local build has only its own).

    dist/registry/fill.py                                  # the entry without hashes
    dist/registry/fill.py --archives target/distrib        # the release workflow
    dist/registry/fill.py --archives target/distrib --allow-missing --out target/distrib/agent.json
"""

import argparse
import hashlib
import json
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENTRY = ROOT / "dist" / "registry" / "kin" / "agent.json"

# The registry's platform names and the Rust targets dist builds for them
# (dist-workspace.toml's `targets`; tests/it/registry.rs checks the two agree).
PLATFORMS = {
    "darwin-aarch64": "aarch64-apple-darwin",
    "darwin-x86_64": "x86_64-apple-darwin",
    "linux-aarch64": "aarch64-unknown-linux-gnu",
    "linux-x86_64": "x86_64-unknown-linux-gnu",
}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def entry(archives: Path | None, allow_missing: bool) -> dict:
    package = tomllib.loads((ROOT / "Cargo.toml").read_text())["package"]
    version = package["version"]
    repository = package["repository"].rstrip("/")
    binary = {}
    for platform, target in PLATFORMS.items():
        name = f"kin-{target}"
        item = {
            "archive": f"{repository}/releases/download/v{version}/{name}.tar.gz",
            "cmd": f"./{name}/kin",
            "args": ["acp"],
        }
        if archives is not None:
            archive = archives / f"{name}.tar.gz"
            if archive.is_file():
                item["sha256"] = sha256(archive)
            elif not allow_missing:
                sys.exit(f"fill.py: {archive} is missing (--allow-missing leaves its hash out)")
        binary[platform] = item
    return {
        "id": "kin",
        "name": "kin",
        "version": version,
        "description": package["description"],
        "repository": repository,
        "authors": package["authors"],
        "license": package["license"],
        "distribution": {"binary": binary},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archives", type=Path, help="directory holding kin-<target>.tar.gz")
    parser.add_argument("--allow-missing", action="store_true")
    parser.add_argument("--out", type=Path, default=ENTRY)
    args = parser.parse_args()
    text = json.dumps(entry(args.archives, args.allow_missing), indent=2) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
