#!/bin/bash
# numvald HTTP benchmark: wrk (Debian) against numvald and, in the same
# run, against nginx (Debian) serving a static JSON file of the same size as the
# ceiling.
#   - GET /api/v1/jobs/{id} at 64 connections (anonymous read and with a token)
#     vs nginx GET /job.json (the same bytes), wrk --latency for p50/p99;
#   - POST /api/v1/jobs (a small op job, bench/wrk_post.lua) at a few connection
#     counts, durable: numvald is killed with SIGKILL afterwards and the jobs in
#     its database are counted against the 201s wrk received.
# Everything listens on 127.0.0.1 only, runs from a temp dir on the real disk
# (not tmpfs, so fsync costs what it costs), has bounded durations, and is
# stopped on exit (trap). Never run by the test suite.
#
# Usage: bench/http_bench.sh            (from anywhere)
# Env:   DURATION=10s  ROUNDS=2 (GET)  POST_ROUNDS=1  POST_CONNS="1 16 64"  NGINX_WORKERS=1
#        BUILD=<repo>/build-bench-svc (release build, set up if missing)
#        SYNC=full|normal (numvald [server] synchronous; default full)
#        NUMVALD=/path/to/numvald (skip the build and use this binary)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench-svc}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-2}
POST_ROUNDS=${POST_ROUNDS:-1}
POST_CONNS=${POST_CONNS:-"1 16 64"}
NGINX_WORKERS=${NGINX_WORKERS:-1}
SYNC=${SYNC:-full}
THREADS=2

for p in wrk nginx curl sqlite3; do
    command -v "$p" >/dev/null 2>&1 || [ -x "/usr/sbin/$p" ] ||
        { echo "http_bench: '$p' is missing (apt-get install wrk nginx-light curl sqlite3)" >&2; exit 2; }
done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

if [ -n "${NUMVALD:-}" ]; then # a numvald built elsewhere (e.g. from a clean tree)
    [ -x "$NUMVALD" ] || { echo "http_bench: NUMVALD '$NUMVALD' is not executable" >&2; exit 2; }
else
    if [ ! -f "$BUILD/build.ninja" ]; then
        meson setup "$BUILD" "$ROOT" --buildtype=release >/dev/null
    fi
    ninja -C "$BUILD" daemon/numvald >/dev/null
    NUMVALD=$BUILD/daemon/numvald
fi

TMP=$(mktemp -d "${TMPDIR:-/var/tmp}/numval-http-bench.XXXXXX")
NVD_PID=
NGX_PID=
cleanup() {
    [ -n "$NVD_PID" ] && kill "$NVD_PID" 2>/dev/null && wait "$NVD_PID" 2>/dev/null
    if [ -n "$NGX_PID" ]; then
        kill "$NGX_PID" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$NGX_PID" 2>/dev/null || break; sleep 0.1; done
    fi
    [ -n "$KEEP" ] || rm -rf "$TMP"
}
trap cleanup EXIT
KEEP=${KEEP:-}
trap 'exit 130' INT TERM

wait_file() { # path, tenths of a second
    for _ in $(seq "$2"); do [ -s "$1" ] && return 0; sleep 0.1; done
    echo "http_bench: '$1' did not appear" >&2
    return 1
}

# ---- numvald --------------------------------------------------------------
mkdir -p "$TMP/data"
cat >"$TMP/numvald.ini" <<EOF
[server]
listen = 127.0.0.1:0
data_dir = $TMP/data
synchronous = $SYNC
anonymous_read = loopback
[limits]
queue_depth = 10000000
max_connections = 4096
EOF
TOKEN=$("$NUMVALD" --config "$TMP/numvald.ini" token create bench --scope submit,read 2>/dev/null)
start_numvald() {
    rm -f "$TMP/port"
    "$NUMVALD" --config "$TMP/numvald.ini" --port-file "$TMP/port" 2>>"$TMP/numvald.log" &
    NVD_PID=$!
    wait_file "$TMP/port" 100
    NVD_PORT=$(cat "$TMP/port")
    NVD=http://127.0.0.1:$NVD_PORT
}
start_numvald

BODY='{"kind":"op","op":"exp","dtypes":["fp32"],"shapes":[[16]],"seed":1,"build":{"name":"kernels","version":"1.2","commit":"abc123"}}'
JOB_ID=$(curl -sf -X POST -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -d "$BODY" "$NVD/api/v1/jobs" | sed -n 's/^{"job": *{"id": *\([0-9]*\).*/\1/p')
[ -n "$JOB_ID" ] || { echo "http_bench: seed job was not created" >&2; exit 1; }

# ---- nginx: the same bytes as the GET job response ------------------------
mkdir -p "$TMP/nginx/www" "$TMP/nginx/tmp"
# Run as root, nginx's workers drop to 'nobody': they must be able to read the file.
chmod 755 "$TMP" "$TMP/nginx" "$TMP/nginx/www"
curl -sf "$NVD/api/v1/jobs/$JOB_ID" -o "$TMP/nginx/www/job.json"
SIZE=$(stat -c %s "$TMP/nginx/www/job.json")
cat >"$TMP/nginx/nginx.conf" <<EOF
daemon off;
worker_processes $NGINX_WORKERS;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    default_type application/json;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000000;
    client_body_temp_path $TMP/nginx/tmp/body;
    proxy_temp_path $TMP/nginx/tmp/proxy;
    fastcgi_temp_path $TMP/nginx/tmp/fastcgi;
    uwsgi_temp_path $TMP/nginx/tmp/uwsgi;
    scgi_temp_path $TMP/nginx/tmp/scgi;
    server {
        listen 127.0.0.1:0;
        root $TMP/nginx/www;
        location = /job.json { types { } default_type application/json; }
    }
}
EOF
# nginx cannot report an ephemeral port; pick a free one from the kernel.
NGX_PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sed -i "s/listen 127.0.0.1:0;/listen 127.0.0.1:$NGX_PORT;/" "$TMP/nginx/nginx.conf"
"$NGINX" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -e "$TMP/nginx/error.log" &
NGX_PID=$!
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$NGX_PORT/job.json" -o /dev/null && break; sleep 0.1; done
cmp -s "$TMP/nginx/www/job.json" <(curl -sf "http://127.0.0.1:$NGX_PORT/job.json") ||
    { echo "http_bench: nginx does not serve the job file" >&2; exit 1; }

# ---- wrk runs ---------------------------------------------------------------
# ms <wrk latency token>: 812.00us / 1.23ms / 2.01s -> milliseconds
ms() { awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /[0-9]s$/ && v !~ /ms$/) n *= 1000; else if (v ~ /m$/) n *= 60000; printf "%.2f", n }'; }
ROWS=()
POST_OK=0
run() { # label conns url [wrk args...]
    local label=$1 conns=$2 url=$3
    shift 3
    local t=$THREADS
    [ "$conns" -lt "$t" ] && t=$conns
    local load0 out
    load0=$(cut -d' ' -f1 /proc/loadavg)
    out=$(wrk -t"$t" -c"$conns" -d"$DURATION" --timeout 5s --latency "$@" "$url")
    echo "$out" >>"$TMP/wrk.log"
    local rps p50 p99 reqs non2xx err
    rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
    p50=$(ms "$(awk '$1 == "50%" {print $2}' <<<"$out")")
    p99=$(ms "$(awk '$1 == "99%" {print $2}' <<<"$out")")
    reqs=$(awk '/requests in/ {print $1}' <<<"$out")
    non2xx=$(awk '/Non-2xx/ {print $5}' <<<"$out")
    err=$(awk '/Socket errors/ {print $3 $4 $5 $6 $7 $8 $9}' <<<"$out")
    ROWS+=("$(printf '%-26s %5s %11s %8s %8s %9s %6s %5s/%-5s %s' "$label" "$conns" "$rps" "$p50" \
        "$p99" "$reqs" "${non2xx:-0}" "$load0" "$(cut -d' ' -f1 /proc/loadavg)" "$err")")
    LAST_OK=$((reqs - ${non2xx:-0}))
}

echo "http_bench: numvald $NVD (synchronous=$SYNC), nginx http://127.0.0.1:$NGX_PORT" \
     "($NGINX_WORKERS worker), body $SIZE bytes, $DURATION per run, data in $TMP" >&2
get_run() {
    case $1 in
    0) run "numvald GET job" 64 "$NVD/api/v1/jobs/$JOB_ID" ;;
    1) run "numvald GET job (token)" 64 "$NVD/api/v1/jobs/$JOB_ID" -H "Authorization: Bearer $TOKEN" ;;
    2) run "nginx GET static" 64 "http://127.0.0.1:$NGX_PORT/job.json" ;;
    esac
}
# The order rotates each round so that no server always runs first or last.
for r in $(seq "$ROUNDS"); do
    for i in 0 1 2; do get_run $(((i + r - 1) % 3)); done
done
for r in $(seq "$POST_ROUNDS"); do
    for c in $POST_CONNS; do
        NUMVAL_TOKEN=$TOKEN run "numvald POST job" "$c" "$NVD/api/v1/jobs" -s "$ROOT/bench/wrk_post.lua"
        POST_OK=$((POST_OK + LAST_OK))
    done
done

# ---- durability: SIGKILL, then count what the database holds -------------------
kill -9 "$NVD_PID"
wait "$NVD_PID" 2>/dev/null || true
NVD_PID=
STORED=$(sqlite3 "$TMP/data/numvald.db" 'SELECT COUNT(*) FROM jobs')

printf '\n%-26s %5s %11s %8s %8s %9s %6s %11s %s\n' "run" "conns" "req/s" "p50 ms" "p99 ms" \
    "requests" "non2xx" "load1 b/a" "socket errors"
printf '%s\n' "${ROWS[@]}"
echo
# Medians over the rounds (the machine is shared: single runs swing widely).
printf '%s\n' "${ROWS[@]}" | awk '
    { label = substr($0, 1, 26); sub(/ +$/, "", label) }
    { k = label "|" substr($0, 28, 5) + 0; n[k]++; rps[k, n[k]] = substr($0, 34, 11) + 0;
      p99[k, n[k]] = substr($0, 55, 8) + 0; if (!(k in seen)) { seen[k] = 1; order[++m] = k } }
    function med(a, k, c,   i, j, t, v) {
        for (i = 1; i <= c; i++) v[i] = a[k, i]
        for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
        return c % 2 ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2
    }
    END {
        printf "%-34s %6s %11s %12s\n", "median over rounds", "runs", "req/s", "p99 ms"
        for (i = 1; i <= m; i++) {
            k = order[i]; split(k, f, "|"); r[k] = med(rps, k, n[k])
            printf "%-26s @%-6s %6d %11.0f %12.2f\n", f[1], f[2], n[k], r[k], med(p99, k, n[k])
        }
        g = "numvald GET job|64"; x = "nginx GET static|64"
        if ((g in r) && (x in r) && r[x] > 0)
            printf "numvald GET / nginx GET (medians): %.0f%%\n", 100 * r[g] / r[x]
    }'
echo
echo "GET body: $SIZE bytes (nginx serves the identical file)."
echo "POST durability: wrk counted $POST_OK 2xx answers; after SIGKILL the database holds" \
     "$STORED jobs (1 seed + those; requests still in flight when a run ends, at most" \
     "its connection count, are stored but not counted by wrk)."
if [ "$STORED" -lt $((POST_OK + 1)) ]; then
    echo "http_bench: LOST JOBS: fewer stored than acknowledged" >&2
    exit 1
fi
