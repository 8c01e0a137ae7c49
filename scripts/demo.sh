#!/usr/bin/env bash
# Set up and run the main job: install what is missing, build, start numvald on the
# embedded SQLite default (./var) with one local worker on the emulated accelerator,
# submit the smoke suite, print each job's verdict once and the totals, and leave the
# daemon running with the URL of this build's results.
#   scripts/demo.sh          run (idempotent: restarts a daemon it started before)
#   scripts/demo.sh stop     stop the daemon it started
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
data="$top/var"
pidfile="$data/numvald.pid"
listen="${NUMVAL_LISTEN:-127.0.0.1:8080}"

stop_daemon() {
    if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        kill "$(cat "$pidfile")"
        for _ in $(seq 50); do kill -0 "$(cat "$pidfile")" 2>/dev/null || break; sleep 0.1; done
        echo "numval: stopped numvald (pid $(cat "$pidfile"))"
    fi
    rm -f "$pidfile"
}

if [ "${1:-}" = "stop" ]; then stop_daemon; exit 0; fi

scripts/deps.sh build
if [ ! -d build-release ]; then
    echo "numval: configuring build-release (meson, release)"
    meson setup build-release --buildtype=release >/dev/null
fi
# Only the three programs (and what they link): the demo runs nothing else, so the
# tests and benchmarks are not built. ninja shows its own progress.
echo "numval: building numvald, numval-worker and numvalctl in build-release"
ninja -C build-release daemon/numvald worker/numval-worker client/numvalctl

bin="$top/build-release"
mkdir -p "$data"
cat > "$data/numvald.ini" <<INI
# Written by scripts/demo.sh: one local emulated device, loopback only.
[server]
listen = $listen
anonymous_read = loopback

[device emu0]
backend = emu
slots = 1
worker = $bin/worker/numval-worker
INI

stop_daemon
"$bin/daemon/numvald" --check-config --config "$data/numvald.ini" --data-dir "$data"
nohup "$bin/daemon/numvald" --config "$data/numvald.ini" --data-dir "$data" \
    --web-dir "$top/web" >"$data/numvald.log" 2>&1 &
echo $! >"$pidfile"

url="http://$listen"
for _ in $(seq 100); do
    curl -fsS "$url/healthz" >/dev/null 2>&1 && break
    kill -0 "$(cat "$pidfile")" 2>/dev/null || { echo "numval: numvald exited; see $data/numvald.log" >&2; tail -20 "$data/numvald.log" >&2; exit 2; }
    sleep 0.1
done

# A submit-scoped token for this demo, minted on the host (printed once, stored hashed).
token=$("$bin/daemon/numvald" token create "demo-$$" --scope submit --data-dir "$data" | tail -1)
export NUMVAL_SERVER="$url" NUMVAL_TOKEN="$token"

build="$(git rev-parse --short HEAD 2>/dev/null || echo dev)"
echo "numval: submitting the smoke suite (suites/smoke.json) to $url as build demo $build"
# One line per job (its verdict; why it did not pass) and the summary line, from
# numvalctl's stderr; the job ids on its stdout would repeat them.
report="$data/demo-report.txt"
set +e
"$bin/client/numvalctl" submit suites/smoke.json --build-name demo --build-version "$build" \
    --wait --quiet 2>&1 >/dev/null | tee "$report"
rc=${PIPESTATUS[0]}
set -e
summary=$(grep -E '^== [0-9]+ jobs?: ' "$report" | tail -1 || true)
if [[ $summary =~ ^==\ ([0-9]+)\ jobs?:\ ([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ errors?\ in ]]; then
    jobs=${BASH_REMATCH[1]} passed=${BASH_REMATCH[2]} failed=${BASH_REMATCH[3]} errors=${BASH_REMATCH[4]}
    cases=$((passed + failed + errors))
    if [ "$failed" = 0 ] && [ "$errors" = 0 ]; then
        echo "numval: $jobs jobs, $cases cases: all passed"
    else
        echo "numval: $jobs jobs, $cases cases: $failed failed, $errors errors (see the lines above)"
    fi
else
    echo "numval: the suite did not finish (numvalctl exit $rc; see above)"
fi

# This build's jobs in the web UI: the jobs page filtered by the build's id.
build_id=$("$bin/client/numvalctl" --json builds | python3 -c '
import json, sys
b = [x for x in json.load(sys.stdin)["builds"]
     if x["identity"].get("name") == "demo" and x["identity"].get("version") == sys.argv[1]]
print(b[0]["id"] if b else "")' "$build" 2>/dev/null || true)

cat <<MSG

numval is running:
  results     $url/#/jobs${build_id:+?build=$build_id}
  web UI      $url/
  API         $url/api/v1/jobs
  log         $data/numvald.log
  token       NUMVAL_SERVER=$url NUMVAL_TOKEN=$token $bin/client/numvalctl jobs
  stop        scripts/demo.sh stop
MSG
exit $rc
