#!/usr/bin/env bash
# `npm run bootstrap`: installs the Debian packages podwire needs when they
# are missing (one apt-get update, only then), makes node-gyp build against
# the local Node headers, then the npm dependencies (which builds the addon
# and the TypeScript). Quick when all is present.
set -euo pipefail
cd "$(dirname "$0")/.."

# Tools podwire drives or its tests exec (ip/ss: iproute2; iptables{,-nft,-legacy}[-save|-restore];
# ipset; nft; flock: util-linux; timeout/readlink/cat/sleep: coreutils; python3: a test app),
# the CNI plugins the demo's --cni mode uses, and the native toolchain: node-gyp (python3, make,
# g++), CMake for ctest, clang + its compiler-rt (libFuzzer, ASan/UBSan runtimes and
# <fuzzer/FuzzedDataProvider.h>, Debian's libclang-rt-N-dev) for the fuzz targets.
packages=(iproute2 iptables ipset nftables containernetworking-plugins util-linux procps coreutils
          build-essential python3 make g++ cmake pkg-config clang
          openssl time  # the test control plane: its certs, and the build's peak-memory report
          python3-prometheus-client  # the tests read /metrics with Prometheus' own Python parser
          containerd runc tini busybox-static  # the CRI tests' real runtime (tini reaps its shims; busybox: a test image)
          buildah)  # the container image, no daemon (deploy/image/build.mjs, test/deploy/image.test.ts)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# libclang-rt-<major>-dev for the clang that is (or will be) installed.
clang_rt_package() {
  local v
  v=$(clang --version 2>/dev/null | sed -n 's/.*clang version \([0-9][0-9]*\)\..*/\1/p' | head -n 1)
  [ -n "$v" ] || v=$(apt-cache depends clang 2>/dev/null | sed -n 's/.*Depends: clang-\([0-9][0-9]*\)$/\1/p' | head -n 1)
  [ -n "$v" ] && echo "libclang-rt-$v-dev"
}

missing=()
for p in "${packages[@]}"; do installed "$p" || missing+=("$p"); done
rt=$(clang_rt_package || true)
if [ ${#missing[@]} -gt 0 ] || [ -z "$rt" ] || ! installed "$rt"; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "bootstrap: missing Debian packages: ${missing[*]} ${rt:-libclang-rt-N-dev} (run as root, or install them)" >&2
    exit 1
  fi
  apt-get update -qq
  rt=$(clang_rt_package || true)
  [ -n "$rt" ] || { echo "bootstrap: cannot tell which libclang-rt-N-dev matches clang" >&2; exit 1; }
  installed "$rt" || missing+=("$rt")
  echo "bootstrap: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# node-gyp must build against the local Node headers (its download site may be unreachable).
# Unless npm already has a nodedir, point it at <node prefix>/include/node, for this npm ci
# and (through a git-ignored project .npmrc) for later rebuilds by `npm test`.
nodedir=$(npm config get nodedir 2>/dev/null || true)
if [ -z "$nodedir" ] || [ "$nodedir" = undefined ] || [ "$nodedir" = null ]; then
  prefix=$(dirname "$(dirname "$(command -v node)")")
  if [ ! -f "$prefix/include/node/node_api.h" ]; then
    echo "bootstrap: no Node headers at $prefix/include/node (node_api.h) and npm has no nodedir;" >&2
    echo "  install them (Debian: apt-get install libnode-dev / nodejs headers) or run npm config set nodedir DIR" >&2
    exit 1
  fi
  export npm_config_nodedir=$prefix
  touch .npmrc
  grep -q '^nodedir=' .npmrc || echo "nodedir=$prefix" >>.npmrc
  echo "bootstrap: node-gyp uses the headers in $prefix/include/node (nodedir in ./.npmrc)"
elif [ ! -f "$nodedir/include/node/node_api.h" ]; then
  echo "bootstrap: npm's nodedir ($nodedir) has no include/node/node_api.h" >&2
  exit 1
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
