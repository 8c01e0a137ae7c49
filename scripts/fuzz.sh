#!/usr/bin/env bash
# Fuzz numval's input parsers with libFuzzer (docs/RELIABILITY.md): the HTTP request
# parser, job-spec validation, the artifact container reader, the safetensors reader
# and the exec-protocol reply reader. Builds build-fuzz (clang, -fsanitize=fuzzer, ASan + UBSan) when needed.
#
#   scripts/fuzz.sh TARGET [SECONDS] [LIBFUZZER-ARGS...]
#       run one target (spec | http | artifact | exec | safetensors | all, one by one) for
#       SECONDS (default 600) from its committed seeds plus what earlier runs found
#       (build-fuzz/fuzz/TARGET/corpus, kept); reproducers go to
#       build-fuzz/fuzz/TARGET/crashes. E.g. scripts/fuzz.sh spec 3600
#   scripts/fuzz.sh --ci
#       the short run of scripts/test.sh: every target 60 s from its seeds alone
#       (meson suite 'fuzz', results in build-fuzz/meson-logs/testlog.json)
#
# A finding prints the reproducer; rerun it with build-fuzz/tests/fuzz/fuzz-TARGET FILE.
# To keep inputs a long run found as seeds: build-fuzz/tests/fuzz/fuzz-TARGET -merge=1
# tests/fuzz/corpus/TARGET build-fuzz/fuzz/TARGET/corpus (minimizes into the first dir).
set -uo pipefail
cd "$(dirname "$0")/.."

dir=build-fuzz
setup=(--buildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false
       -Dc_args=-fsanitize=fuzzer-no-link)

build() {
    command -v clang >/dev/null || { echo "fuzz: clang is missing (scripts/deps.sh test)" >&2; return 1; }
    if [ -d "$dir" ]; then
        meson configure "$dir" "${setup[@]}" >/dev/null || return 1
    else
        CC=clang meson setup "$dir" "${setup[@]}" >/dev/null || return 1
    fi
    ninja -C "$dir" fuzz
}

case "${1:-}" in
    --ci)
        rm -f "$dir/meson-logs/testlog.json"
        build || { echo "numval: fuzz build failed in $dir" >&2; exit 1; }
        exec meson test -C "$dir" --suite fuzz --no-rebuild --print-errorlogs \
            --num-processes "$(nproc)"
        ;;
    spec | http | artifact | exec | safetensors | all) ;;
    *)
        awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
        exit 2
        ;;
esac

target=$1 seconds=${2:-600}
shift
[ $# -gt 0 ] && shift
build >/dev/null || { echo "fuzz: the build of $dir failed (ninja -C $dir fuzz)" >&2; exit 1; }
[ "$target" = all ] && targets=(spec http artifact exec safetensors) || targets=("$target")
rc=0
for t in "${targets[@]}"; do
    tests/fuzz/run.sh "$dir/tests/fuzz/fuzz-$t" "$t" "$seconds" "$dir/fuzz/$t" "$@" || rc=1
done
exit $rc
