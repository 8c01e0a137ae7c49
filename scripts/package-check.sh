#!/usr/bin/env bash
# Build and install the Debian packages on a fresh Debian 12 and use them as a lab
# would: a minimal bookworm made by debootstrap (kept as a pristine copy, a
# throw-away copy of it per run); with --build, this tree is cloned into it and
# scripts/package.sh (dpkg-buildpackage, lintian) builds the packages there, its
# build dependencies from the Debian mirror; else the .debs of DEB_DIR are used.
# The four .debs are installed with apt, `systemd-analyze verify` checks the
# installed units, numvald runs as user numval from the packaged config, a token
# per scope, the installed worker on emu runs the whole installed smoke suite
# submitted by the installed numvalctl (--wait: every job must pass); then purge,
# and nothing of numval may be left. Needs root and the Debian mirror.
#   scripts/package-check.sh DEB_DIR     (DEB_DIR: scripts/package.sh's OUT_DIR)
#   scripts/package-check.sh --build     (the committed tree, HEAD)
# NUMVAL_BOOKWORM=DIR keeps the pristine bookworm there (default
# /var/tmp/numval-bookworm); NUMVAL_MIRROR overrides http://deb.debian.org/debian.
# Prints "ok - ..." / "not ok - ..." per check and "N passed, N failed" last.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=
if [ "${1:-}" = --build ]; then build=1; else
    debs=$(realpath "${1:?usage: scripts/package-check.sh DEB_DIR | --build}")
    ls "$debs"/numval-{server,worker,client,common}_*.deb >/dev/null ||
        { echo "package-check: $debs lacks the four numval .debs" >&2; exit 2; }
fi
pristine=${NUMVAL_BOOKWORM:-/var/tmp/numval-bookworm}
mirror=${NUMVAL_MIRROR:-http://deb.debian.org/debian}
[ "$(id -u)" = 0 ] || { echo "package-check: needs root (debootstrap, chroot)" >&2; exit 2; }

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
inroot() { chroot "$root" "$@"; }
if [ -n "$build" ]; then
    git clone -q "$top" "$root/root/numval"
    inroot apt-get update -q >/dev/null && inroot env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q git ca-certificates >/dev/null 2>&1
    (cd "$root" && chroot "$root" /bin/sh -c \
        'cd /root/numval && scripts/package.sh --no-check /tmp/debs') >"$root/tmp/build.log" 2>&1
    check $? "on the fresh bookworm: scripts/package.sh (its build dependencies installed by \
scripts/deps.sh, dpkg-buildpackage, lintian) built $(ls "$root"/tmp/debs/*.deb 2>/dev/null | wc -l) .debs"
    grep -q 'lintian: no errors or warnings' "$root/tmp/build.log"
    check $? "lintian: no errors or warnings"
    if ! ls "$root"/tmp/debs/numval-server_*.deb >/dev/null 2>&1; then
        echo "--- build.log"; tail -15 "$root/tmp/build.log"
        echo "$passed passed, $failed failed"
        exit 1
    fi
else
    cp "$debs"/numval-{server,worker,client,common}_*.deb "$root/tmp/debs/"
fi

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
inroot env DEBIAN_FRONTEND=noninteractive apt-get install -y -q systemd man-db >/dev/null 2>&1
mkdir -p "$root/tmp/units"
cp "$root/lib/systemd/system/numval-worker@.service" "$root/tmp/units/numval-worker@gpu0.service"
out=$(inroot systemd-analyze verify /lib/systemd/system/numvald.service \
    /tmp/units/numval-worker@gpu0.service /lib/systemd/system/numval-prune.service \
    /lib/systemd/system/numval-prune.timer 2>&1)
[ $? = 0 ] && [ -z "$out" ]
check $? "systemd-analyze verify: numvald, numval-worker@gpu0, numval-prune service and timer${out:+: $out}"

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
    --backend emu >"$root/tmp/worker.log" 2>&1 &
wpid=$!
sleep 1
inroot /usr/bin/numvalctl --server "$url" --token "$sub" submit \
    /usr/share/numval/suites/smoke.json --device emu0 --new-device --wait --quiet \
    --timeout 1800 >"$root/tmp/submit.out" 2>"$root/tmp/submit.err"
check $? "the installed numvalctl ran the installed smoke suite on the installed worker (emu): \
$(grep "^== " "$root/tmp/submit.err" | tail -1)"
kill "$wpid" 2>/dev/null
wait "$wpid"
kill "$pid"; wait "$pid"; check $? "numvald exits 0 on SIGTERM"
pid=
inroot env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q numval-server numval-worker \
    numval-client numval-common >/dev/null 2>&1
check $? "apt-get purge of the four packages"
left=$(inroot dpkg-query -W -f '${db:Status-Abbrev} ${Package}\n' 'numval*' 2>/dev/null | grep -v '^un ')
[ -z "$left" ] && [ ! -e "$root/etc/numval" ]; check $? "no numval package and no /etc/numval left"
for f in build.log install.log numvald.log worker.log submit.out submit.err; do
    [ "$failed" = 0 ] || { echo "--- $f"; tail -15 "$root/tmp/$f" 2>/dev/null; }
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
