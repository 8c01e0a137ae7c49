#!/bin/sh
# Cases per second through the exec protocol vs the in-process emu backend, for
# 10^5-element cases (issue 9). Each backend runs the same job twice, with SMALL and
# LARGE samples; the per-case time is the difference divided by LARGE - SMALL, so
# harness start-up (importing torch: seconds) is not counted; each run is the
# fastest of REPEAT. Backends:
#   emu                       in-process emulated device
#   exec echo                 bench/exec_echo_harness.py: the protocol alone
#   exec torch                worker/harness/torch_harness.py --device cpu
# usage: bench/exec_bench.sh [BUILD_DIR]     (prints a markdown table)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-torch}
W=$BUILD/worker/numval-worker
PY=/usr/bin/python3
SMALL=${SMALL:-2}
LARGE=${LARGE:-22}
REPEAT=${REPEAT:-3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

job() { # op samples
    printf '{"kind":"op","op":"%s","dtypes":["fp32"],"shapes":[[100000]],"inputs":["normal"],"samples":%s,"seed":3}\n' "$1" "$2" > "$TMP/$1-$2.json"
    echo "$TMP/$1-$2.json"
}

secs() { # jobfile backend -> wall seconds of one worker run
    s=$(date +%s.%N)
    "$W" run "$1" --backend "$2" --threads 1 > "$TMP/out.json" 2> "$TMP/err.txt" || true
    e=$(date +%s.%N)
    $PY -c "import json,sys; d=json.load(open('$TMP/out.json')); s=d['summary']; sys.exit(0 if s['errors']==0 else 1)" \
        || { echo "backend $2 errored: $(tail -c 400 "$TMP/err.txt")" >&2; exit 1; }
    echo "$e - $s" | bc -l
}

best() { # jobfile backend -> the fastest of REPEAT runs (this machine is shared)
    m=""
    for _ in $(seq "$REPEAT"); do
        t=$(secs "$1" "$2")
        if [ -z "$m" ] || [ "$(echo "$t < $m" | bc -l)" = 1 ]; then m=$t; fi
    done
    echo "$m"
}

row() { # label op backend
    a=$(best "$(job "$2" "$SMALL")" "$3")
    b=$(best "$(job "$2" "$LARGE")" "$3")
    per=$(echo "($b - $a) / ($LARGE - $SMALL)" | bc -l)
    printf '| %s | %s | %.2f ms | %.1f |\n' "$1" "$2" "$(echo "$per * 1000" | bc -l)" "$(echo "1 / $per" | bc -l)"
}

echo "| backend | op (fp32, 10^5 elements) | time per case | cases/s |"
echo "|---|---|---|---|"
row "emu (in process)" neg emu
row "exec: echo harness (protocol only)" neg "exec:$PY $ROOT/bench/exec_echo_harness.py"
row "exec: torch --device cpu" neg "exec:$PY $ROOT/worker/harness/torch_harness.py --device cpu"
row "emu (in process)" exp emu
row "exec: torch --device cpu" exp "exec:$PY $ROOT/worker/harness/torch_harness.py --device cpu"
