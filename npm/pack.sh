#!/usr/bin/env bash
# Builds the release binary and writes the npm tarballs to npm/dist/: `batchguard` (the
# JavaScript package) and the platform package of this machine (platforms.json names it).
# Another target is one more entry in platforms.json and one more run of this script on (or
# cross-compiling for) that target. No install script, no download: npm picks the platform
# package through `optionalDependencies`, as esbuild and biome ship their binaries.
#
#   npm/pack.sh                      # build, then pack both
#   BATCHGUARD_PACK_BINARY=path npm/pack.sh   # pack a binary built already (no cargo)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
dist="$here/dist"

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n1)"
js_version="$(node -p 'require(process.argv[1]).version' "$here/batchguard/package.json")"
if [ "$version" != "$js_version" ]; then
  echo "error: npm/batchguard/package.json is version $js_version but Cargo.toml is $version" >&2
  exit 1
fi

# The entry of platforms.json for this machine (the same lookup the package makes at run time).
entry="$(node -e '
  const { currentPlatform } = require(process.argv[1]);
  const p = currentPlatform();
  if (!p) { console.error("error: no entry in npm/batchguard/platforms.json for " + process.platform + "-" + process.arch); process.exit(1); }
  console.log(JSON.stringify(p));
' "$here/batchguard/lib/binary.js")"
field() { node -p "JSON.parse(process.argv[1])[process.argv[2]]" "$entry" "$1"; }
platform="$(field name)"
package="$(field package)"
binary_name="$(field binary)"

binary="${BATCHGUARD_PACK_BINARY:-}"
if [ -z "$binary" ]; then
  # Wherever cargo puts it (CARGO_TARGET_DIR, build.target-dir …), as cargo reports it.
  . "$root/scripts/cargo-exe.sh"
  binary="$(cd "$root" && cargo_exe batchguard --release --locked -p batchguard)"
fi
[ -x "$binary" ] || { echo "error: $binary is not an executable" >&2; exit 1; }

# The optional dependency must name this version, or npm would look for another one.
pinned="$(node -p "require(process.argv[1]).optionalDependencies[process.argv[2]] || ''" "$here/batchguard/package.json" "$package")"
if [ "$pinned" != "$version" ]; then
  echo "error: npm/batchguard/package.json must list \"$package\": \"$version\" in optionalDependencies" >&2
  exit 1
fi

stage="$dist/stage"
rm -rf "$stage"
mkdir -p "$stage/$platform/bin"
install -m 0755 "$binary" "$stage/$platform/bin/$binary_name"
node -e '
  const [entry, version, out] = process.argv.slice(1);
  const p = JSON.parse(entry);
  const manifest = {
    name: p.package,
    version,
    description: `The batchguard binary for ${p.name} (${p.rustTarget}); installed by the batchguard package`,
    license: "UNLICENSED",
    os: [p.os],
    cpu: [p.cpu],
    ...(p.libc ? { libc: [p.libc] } : {}),
    files: ["bin/"],
    preferUnplugged: true,
  };
  require("node:fs").writeFileSync(out, JSON.stringify(manifest, null, 2) + "\n");
' "$entry" "$version" "$stage/$platform/package.json"
printf '# %s\n\nThe `batchguard` binary for %s. Install `batchguard` instead: it depends on this package.\n' \
  "$package" "$platform" >"$stage/$platform/README.md"

cp -R "$here/batchguard" "$stage/batchguard"
mkdir -p "$dist"
rm -f "$dist"/batchguard-*.tgz
(cd "$dist" && npm pack --silent "$stage/batchguard" "$stage/$platform" >/dev/null)
rm -rf "$stage"
ls "$dist"/*.tgz
