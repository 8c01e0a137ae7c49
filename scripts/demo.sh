#!/usr/bin/env bash
# Set up and run the main job: install what is missing, build, start numvald on the
# embedded SQLite default (./var) with one local worker on the emulated accelerator,
# submit the smoke suite, print the verdicts and leave the daemon running.
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
if [ ! -d build-release ]; then meson setup build-release --buildtype=release >/dev/null; fi
ninja -C build-release >/dev/null

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

echo "numval: submitting the smoke suite (suites/smoke.json) to $url"
set +e
"$bin/client/numvalctl" submit suites/smoke.json --build-name demo --build-version "$(git rev-parse --short HEAD 2>/dev/null || echo dev)" --wait
rc=$?
set -e
"$bin/client/numvalctl" jobs --limit 50

cat <<MSG

numval is running:
  web UI      $url/
  API         $url/api/v1/jobs
  log         $data/numvald.log
  token       NUMVAL_SERVER=$url NUMVAL_TOKEN=$token $bin/client/numvalctl jobs
  stop        scripts/demo.sh stop
MSG
exit $rc
