#!/usr/bin/env bash
# Install the Debian 12 packages numval needs (only the missing ones).
#   scripts/deps.sh build    compiler, meson and the libraries
#   scripts/deps.sh test     build + what the tests drive (python3, torch, chromium, node,
#                            clang and libFuzzer for the fuzz pass)
#   scripts/deps.sh bench    test + the peers of the benchmarks (wrk, nginx)
#   scripts/deps.sh package  build + what scripts/package.sh needs (debhelper, lintian)
set -euo pipefail

build_pkgs=(gcc pkg-config meson ninja-build libuv1-dev libsqlite3-dev libcurl4-openssl-dev
            libjansson-dev libzstd-dev libhttp-parser-dev libinih-dev libmpfr-dev libgmp-dev
            python3 zstd curl ca-certificates scdoc)
# clang + libclang-rt-14-dev (libFuzzer and the sanitizer runtimes; only recommended by
# clang) + llvm (llvm-symbolizer, for stack traces): the fuzz pass, scripts/fuzz.sh.
# man-db (man -l) and systemd (systemd-analyze): the man-pages and systemd-units tests.
# nginx-light + openssl: the TLS proxy test (tests/integration/test_tls_proxy.py).
# slurm-wlm (slurmctld, slurmd, slurm-client) and munge: the slurm-pool test's one-node cluster
# (the test starts its own daemons; the packages' services stay unused).
test_pkgs=(python3-numpy python3-torch python3-jsonschema chromium fonts-liberation
           clang libclang-rt-14-dev llvm man-db systemd nginx-light openssl slurm-wlm munge)
bench_pkgs=(wrk nginx-light)
package_pkgs=(build-essential debhelper dpkg-dev fakeroot lintian)

want=("${build_pkgs[@]}")
case "${1:-build}" in
    build) ;;
    test) want+=("${test_pkgs[@]}") ;;
    bench) want+=("${test_pkgs[@]}" "${bench_pkgs[@]}") ;;
    package) want+=("${package_pkgs[@]}") ;;
    *) echo "usage: $0 build|test|bench|package" >&2; exit 2 ;;
esac

# Node and npm: Debian's nodejs + npm unless a node (e.g. an image's own build,
# which bundles npm and conflicts with Debian's npm package) is already there.
if [ "${1:-build}" != build ] && [ "${1:-build}" != package ] && ! { command -v node && command -v npm; } >/dev/null 2>&1; then
    want+=(nodejs npm)
fi

missing=()
for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "numval: installing Debian packages: ${missing[*]}" >&2
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
