#!/usr/bin/env bash
# Install the Debian packages on a fresh Debian 12 and use them as a lab would:
# a minimal bookworm made by debootstrap (kept as a pristine copy, a throw-away
# copy of it per run), the four .debs installed with apt (their dependencies
# from the Debian mirror), numvald started as user numval from the packaged
# config, a token per scope, the installed worker on emu, the installed smoke
# suite submitted with the installed numvalctl and its first job checked; then
# purge, and nothing of numval may be left. Needs root and the Debian mirror.
#   scripts/package-check.sh DEB_DIR     (DEB_DIR: scripts/package.sh's OUT_DIR)
# NUMVAL_BOOKWORM=DIR keeps the pristine bookworm there (default
# /var/tmp/numval-bookworm); NUMVAL_MIRROR overrides http://deb.debian.org/debian.
# Prints "ok - ..." / "not ok - ..." per check and "N passed, N failed" last.
set -uo pipefail
debs=$(realpath "${1:?usage: scripts/package-check.sh DEB_DIR}")
pristine=${NUMVAL_BOOKWORM:-/var/tmp/numval-bookworm}
mirror=${NUMVAL_MIRROR:-http://deb.debian.org/debian}
[ "$(id -u)" = 0 ] || { echo "package-check: needs root (debootstrap, chroot)" >&2; exit 2; }
ls "$debs"/numval-{server,worker,client,common}_*.deb >/dev/null ||
    { echo "package-check: $debs lacks the four numval .debs" >&2; exit 2; }

passed=0 failed=0
check() { # condition-status, what
    if [ "$1" = 0 ]; then passed=$((passed + 1)); echo "ok - $2"
    else failed=$((failed + 1)); echo "not ok - $2"; fi
}

if [ ! -x "$pristine/usr/bin/apt-get" ]; then
    command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >/dev/null
    debootstrap --variant=minbase bookworm "$pristine" "$mirror" >/dev/null ||
        { echo "package-check: debootstrap failed" >&2; exit 2; }
fi
root=$(mktemp -d /var/tmp/numval-pkgcheck.XXXXXX)
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
    umount "$root/proc" 2>/dev/null
    rm -rf "$root"
}
trap cleanup EXIT
cp -a "$pristine/." "$root/"
mount -t proc proc "$root/proc"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null
mkdir -p "$root/tmp/debs"
cp "$debs"/numval-{server,worker,client,common}_*.deb "$root/tmp/debs/"
inroot() { chroot "$root" "$@"; }

inroot dpkg-query -W 'numval*' >/dev/null 2>&1
check $((! $?)) "the fresh bookworm has no numval package"
inroot apt-get update -q >/dev/null && inroot env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q /tmp/debs/numval-server_*.deb /tmp/debs/numval-worker_*.deb \
    /tmp/debs/numval-client_*.deb /tmp/debs/numval-common_*.deb >"$root/tmp/install.log" 2>&1
check $? "apt-get install of the four packages on a fresh bookworm ($(grep -c '^Setting up' \
    "$root/tmp/install.log") packages set up, the dependencies from $mirror)"
n=$(inroot dpkg-query -W -f '${db:Status-Abbrev} ${Package}\n' 'numval*' 2>/dev/null | grep -c '^ii ')
[ "$n" = 4 ]; check $? "all four installed (ii): $n"
inroot id numval >/dev/null 2>&1; check $? "user numval created"
[ "$(inroot stat -c '%U:%G %a' /var/lib/numval)" = "numval:numval 750" ]
check $? "/var/lib/numval numval:numval 750"
[ "$(inroot stat -c '%U:%G %a' /etc/numval/numvald.ini)" = "root:numval 640" ]
check $? "/etc/numval/numvald.ini root:numval 640"
for m in numvald.8 numval-worker.1 numvalctl.1; do
    ls "$root"/usr/share/man/man*/"$m".gz >/dev/null 2>&1; check $? "man page $m installed"
done
[ -f "$root/lib/systemd/system/numvald.service" ] || [ -f "$root/usr/lib/systemd/system/numvald.service" ]
check $? "numvald.service installed"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port
as_numval() { chroot --userspec=numval:numval "$root" "$@"; }
(cd "$root" && exec chroot --userspec=numval:numval "$root" /usr/sbin/numvald \
    --config /etc/numval/numvald.ini --listen "127.0.0.1:$port" >"$root/tmp/numvald.log" 2>&1) &
pid=$!
ok=1
for _ in $(seq 100); do
    if python3 -c "import urllib.request,sys; urllib.request.urlopen('$url/healthz', timeout=2)" 2>/dev/null
    then ok=0; break; fi
    sleep 0.2
done
check $ok "numvald as numval from the packaged config answers /healthz"
grep -q 'web /usr/share/numval/web' "$root/tmp/numvald.log"; check $? "it serves the packaged web UI"
sub=$(as_numval /usr/sbin/numvald --config /etc/numval/numvald.ini token create pkg-submit \
    --scope submit,read 2>/dev/null | tail -1)
host=$(as_numval /usr/sbin/numvald --config /etc/numval/numvald.ini token create pkg-host \
    --scope worker --device emu0 2>/dev/null | tail -1)
[ -n "$sub" ] && [ -n "$host" ]; check $? "tokens made by the installed numvald (submit, worker)"
printf '%s\n' "$host" >"$root/tmp/host.token"
chmod 600 "$root/tmp/host.token"
inroot /usr/bin/numval-worker --server "$url" --token-file /tmp/host.token --device emu0 \
    --backend emu --once >"$root/tmp/worker.log" 2>&1 &
wpid=$!
sleep 1
ids=$(inroot /usr/bin/numvalctl --server "$url" --token "$sub" submit \
    /usr/share/numval/suites/smoke.json --device emu0 --new-device 2>"$root/tmp/submit.err")
check $? "the installed numvalctl submits the installed smoke suite ($(echo "$ids" | wc -w) jobs)"
wait "$wpid"; check $? "the installed worker ran one job on emu and exited 0 (--once)"
first=$(echo "$ids" | head -1 | tr -dc 0-9)
state=$(inroot /usr/bin/numvalctl --server "$url" --token "$sub" --json show "$first" 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["job"]["state"])' 2>/dev/null)
[ "$state" = passed ]; check $? "job $first: $state"
kill "$pid"; wait "$pid"; check $? "numvald exits 0 on SIGTERM"
pid=
inroot env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q numval-server numval-worker \
    numval-client numval-common >/dev/null 2>&1
check $? "apt-get purge of the four packages"
left=$(inroot dpkg-query -W -f '${db:Status-Abbrev} ${Package}\n' 'numval*' 2>/dev/null | grep -v '^un ')
[ -z "$left" ] && [ ! -e "$root/etc/numval" ]; check $? "no numval package and no /etc/numval left"
for f in numvald.log worker.log submit.err install.log; do
    [ "$failed" = 0 ] || { echo "--- $f"; tail -15 "$root/tmp/$f" 2>/dev/null; }
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
