# Sourced by the shell scripts that build and then run a binary of this workspace.
#
#   . scripts/cargo-exe.sh
#   bg=$(cargo_exe batchguard --release -p batchguard) || exit 2
#
# cargo_exe BIN [CARGO BUILD ARGS...] builds BIN and prints the executable's path as cargo
# reports it (its `compiler-artifact` message), so the path is right wherever cargo put it:
# `CARGO_TARGET_DIR`, `CARGO_BUILD_TARGET_DIR`, `build.target-dir` in a .cargo/config.toml,
# a `--target` triple. Guessing `target/release/BIN` breaks on every one of them. Compiler
# messages still go to stderr; a failed build, or no such executable, returns non-zero.
cargo_exe() {
  local bin=$1 json exe
  shift
  json=$(cargo build --message-format=json-render-diagnostics "$@" --bin "$bin") || return 1
  exe=$(printf '%s\n' "$json" | grep -o '"executable":"[^"]*"' | sed 's/^"executable":"//; s/"$//' \
    | grep "/$bin\$" | tail -n 1)
  if [ -z "$exe" ] || [ ! -x "$exe" ]; then
    echo "error: cargo built no executable named $bin" >&2
    return 1
  fi
  printf '%s\n' "$exe"
}
