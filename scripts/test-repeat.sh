#!/usr/bin/env bash
# scripts/test.sh --repeat N [--busy K] SUITE...: runs the meson test suites SUITE...
# N times in a row on build-test and names every failure, so a flaky test shows up
# before it lands. --busy K keeps K CPU-heavy numval-worker jobs running on the side
# (a loaded CI machine). Each run's log is kept in build-test/repeat/run-I.txt.
# Last line: "N passed, N failed" over every test of every run.
set -uo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: scripts/test.sh --repeat N [--busy K] SUITE..." >&2; exit 2; }
n=${1:-}
[[ "$n" =~ ^[1-9][0-9]*$ ]] || usage
shift
busy=0
if [ "${1:-}" = --busy ]; then
    busy=${2:-}
    [[ "$busy" =~ ^[0-9]+$ ]] || usage
    shift 2
fi
[ $# -gt 0 ] || usage
suites=()
for s in "$@"; do suites+=(--suite "$s"); done

scripts/deps.sh test || { echo "0 passed, 1 failed"; exit 1; }
if [ -f tests/browser/package.json ] && [ ! -d tests/browser/node_modules/playwright-core ]; then
    (cd tests/browser && npm ci --no-audit --no-fund) || echo "numval: npm ci failed" >&2
fi
dir=build-test
if [ -d "$dir" ]; then
    meson setup --reconfigure "$dir" -Dwerror=true --buildtype=debugoptimized >/dev/null
else
    meson setup "$dir" -Dwerror=true --buildtype=debugoptimized >/dev/null
fi || { echo "0 passed, 1 failed"; exit 1; }
ninja -C "$dir" >/dev/null || { echo "numval: build failed" >&2; echo "0 passed, 1 failed"; exit 1; }

# The side load: a large exp job with the correctly rounded reference, rerun until
# the repeats are done. Its own process group, stopped on every exit path.
busy_pids=()
stop_busy() {
    for p in "${busy_pids[@]}"; do kill -- -"$p" 2>/dev/null; done
    busy_pids=()
}
trap stop_busy EXIT
if [ "$busy" -gt 0 ]; then
    spec=$(mktemp --suffix=.json)
    echo '{"kind":"op","op":"exp","dtypes":["fp32"],"shapes":[[2000000]],"seed":1}' >"$spec"
    for _ in $(seq "$busy"); do
        setsid bash -c 'while :; do "$0" run "$1" --backend emu >/dev/null 2>&1; done' \
            "$dir/worker/numval-worker" "$spec" &
        busy_pids+=($!)
    done
    echo "numval: $busy CPU-heavy numval-worker job(s) running on the side" >&2
fi

mkdir -p "$dir/repeat"
passed=0 failed=0 skipped=0 bad_runs=0
for i in $(seq "$n"); do
    meson test -C "$dir" --num-processes "$(nproc)" "${suites[@]}" >"$dir/repeat/run-$i.txt" 2>&1
    rc=$?
    read -r p f s < <(python3 - "$dir/meson-logs/testlog.json" "$i" <<'PY'
import json, sys
p = f = s = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    res = r.get("result")
    if res in ("OK", "EXPECTEDFAIL"):
        p += 1
    elif res == "SKIP":
        s += 1
    else:
        f += 1
        print("numval: run %s: %s %s (%.1f s)" % (sys.argv[2], r.get("name"), res,
              r.get("duration", 0)), file=sys.stderr)
print(p, f, s)
PY
)
    if [ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then f=1; fi
    passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0})); skipped=$((skipped + ${s:-0}))
    if [ "${f:-0}" -gt 0 ]; then
        bad_runs=$((bad_runs + 1))
        cp "$dir/meson-logs/testlog.txt" "$dir/repeat/run-$i.log"
        echo "numval: run $i of $n FAILED (log: $dir/repeat/run-$i.log)" >&2
    else
        echo "numval: run $i of $n ok (${p:-0} passed, ${s:-0} skipped)" >&2
    fi
done
stop_busy
echo "numval: $n runs of ${*}: $bad_runs with a failure" >&2
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
