#!/usr/bin/env bash
# Build the Debian packages (packaging/debian) from a clean copy of this tree and
# check them with lintian.
#   scripts/package.sh [--no-check] [OUT_DIR]    (default OUT_DIR: build-deb)
# --no-check skips the unit suite inside the package build (DEB_BUILD_OPTIONS=nocheck).
# The tree copied is what git tracks plus untracked files it does not ignore, so a
# build dir or ./var never reaches the package.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
nocheck=
if [ "${1:-}" = --no-check ]; then nocheck=1; shift; fi
out=$(realpath -m "${1:-build-deb}")

scripts/deps.sh package
version=$(dpkg-parsechangelog -l packaging/debian/changelog -S Version)
work=$(mktemp -d "${TMPDIR:-/tmp}/numval-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
src="$work/numval-$version"
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard | grep -zv '^packaging/debian/' |
    xargs -0 cp --parents -t "$src"
cp -r packaging/debian "$src/debian"

start=$(date +%s)
(cd "$src" && DEB_BUILD_OPTIONS="${nocheck:+nocheck} parallel=$(nproc)" \
    dpkg-buildpackage -us -uc -b)
end=$(date +%s)
mkdir -p "$out"
changes="$work/numval_${version}_$(dpkg-architecture -qDEB_HOST_ARCH).changes"
# shellcheck disable=SC2046
cp $(awk '/^Files:/{f=1;next} /^[^ ]/{f=0} f{print $5}' "$changes" | sed "s|^|$work/|") \
    "$changes" "$out/"
echo "numval: dpkg-buildpackage took $((end - start)) s; packages in $out:"
ls -1 "$out"/*.deb
lintian --fail-on error,warning --info --display-info "$out/$(basename "$changes")"
echo "numval: lintian: no errors or warnings"
