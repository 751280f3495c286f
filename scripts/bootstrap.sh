#!/usr/bin/env bash
# `npm run bootstrap`: installs the Debian packages podwire needs when they
# are missing (one apt-get update, only then), then the npm dependencies
# (which builds the addon and the TypeScript). Quick when all is present.
set -euo pipefail
cd "$(dirname "$0")/.."

# Runtime tools podwire drives or tests against, and the native toolchain
# (clang: the libFuzzer target that npm test runs for a bounded time).
packages=(iproute2 iptables ipset nftables containernetworking-plugins util-linux procps
          build-essential python3 make g++ cmake pkg-config clang)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "bootstrap: missing Debian packages: ${missing[*]} (run as root, or install them)" >&2
    exit 1
  fi
  echo "bootstrap: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm ci only when node_modules is missing or older than the lockfile.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
else
  # Dependencies are current; make sure the addon and dist exist.
  [ -f build/Release/podwire.node ] || npm run build:native --silent
  [ -f dist/cli/main.js ] || npm run build:ts --silent
fi
echo "bootstrap: ready"
