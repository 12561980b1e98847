#!/usr/bin/env bash
# Builds Weft for the browser into a static folder (default target/web):
# index.html, weft_web.js and weft_web_bg.wasm, servable by any web server.
#   web/build.sh [OUT_DIR]
# Needs: rustup target add wasm32-unknown-unknown; cargo install
# wasm-bindgen-cli --version <wasm-bindgen's version in Cargo.lock>.
# WEFT_WEB_PROFILE picks the cargo profile (default: dev, whose opt-level
# is the workspace's; `release` for a smaller, faster page).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/web}"
profile="${WEFT_WEB_PROFILE:-dev}"
dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
want=$(grep -A1 '^name = "wasm-bindgen"$' Cargo.lock | sed -n 's/^version = "\(.*\)"/\1/p')
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')
if [ "$have" != "$want" ]; then
  echo "wasm-bindgen $want is needed (have: ${have:-none}): cargo install wasm-bindgen-cli --version $want" >&2
  exit 1
fi
cargo build -p weft-web --target wasm32-unknown-unknown --profile "$profile"
mkdir -p "$out"
wasm-bindgen --target web --no-typescript --out-dir "$out" \
  "target/wasm32-unknown-unknown/$dir/weft_web.wasm"
cp web/static/index.html "$out/"
wasm="$out/weft_web_bg.wasm"
echo "$out: $(du -h "$wasm" | cut -f1) wasm, $(gzip -9 -c "$wasm" | wc -c | numfmt --to=iec) gzipped"
