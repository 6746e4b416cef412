"""Where cargo puts this workspace's binaries, as cargo itself says it.

`cargo metadata` reports the target directory after `CARGO_TARGET_DIR`,
`CARGO_BUILD_TARGET_DIR` and `build.target-dir` in a .cargo/config.toml, so a script
that builds and then runs a binary finds it in a shared target directory too (guessing
`target/release` does not). Imported by the benchmark and capture scripts beside it.
"""
import json
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent


def target_dir() -> pathlib.Path:
    out = subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps"],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return pathlib.Path(json.loads(out)["target_directory"])


def profile_dir(profile: str = "release") -> pathlib.Path:
    """`release` (cargo build --release) or `debug` (cargo build)."""
    return target_dir() / profile
