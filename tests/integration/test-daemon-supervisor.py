#!/usr/bin/env python3
"""Supervisor: numvald spawns one worker per slot with --server/--token/
--device/--backend, restarts a crashing one with backoff, quarantines the
device after crash_limit crashes (reason visible in /api/v1/devices), and
stops its workers on SIGTERM. Fake workers (shell scripts) stand in for
numval-worker so the test controls how they fail."""
import os
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvdaemon import Daemon, check, main  # noqa: E402


def script(path, body):
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, stat.S_IRWXU)


def device(d, name):
    st, b, _ = d.request("GET", "/api/v1/devices/" + name)
    return b["device"] if st == 200 else None


def test(numvald):
    with Daemon(numvald, limits={"crash_limit": 3, "crash_window_ms": 60000}) as d:
        crash = os.path.join(d.tmp, "crash.sh")
        good = os.path.join(d.tmp, "good.sh")
        argv_file = os.path.join(d.tmp, "argv")
        pid_file = os.path.join(d.tmp, "pid")
        script(crash, 'echo "boom: cannot open /dev/accel0" >&2\nexit 3\n')
        script(good, 'echo "$@" > %s\necho "$NUMVAL_TOKEN" >> %s\necho $$ > %s\nexec sleep 300\n'
               % (argv_file, argv_file, pid_file))
        with open(d.conf, "a") as f:
            f.write("[device flaky]\nbackend = emu:ftz=on\nslots = 1\nworker = %s\n\n"
                    "[device steady]\nbackend = emu\nslots = 1\nworker = %s\n" % (crash, good))
        d.start()
        deadline = time.time() + 30
        while time.time() < deadline:
            dev = device(d, "flaky")
            if dev and dev["state"] == "quarantined":
                break
            time.sleep(0.2)
        check(dev and dev["state"] == "quarantined", "crashing device quarantined (%s)" % dev)
        reason = dev["quarantine_reason"] or ""
        check("3 worker crashes" in reason and "exited with status 3" in reason and
              "boom: cannot open /dev/accel0" in reason,
              "quarantine reason names the count, exit status and last output: %s" % reason)
        check(dev["restarts"] == 2, "restarted twice before quarantine (%s)" % dev["restarts"])
        steady = device(d, "steady")
        check(steady["state"] == "online" and steady["local"], "the healthy device is online")
        with open(argv_file) as f:
            argv, token = f.read().splitlines()[:2]
        argv = argv.split()
        check(argv == ["--server", "http://127.0.0.1:%d" % d.port, "--device", "steady",
                       "--backend", "emu"], "worker argv (no token): %s" % " ".join(argv))
        check(token.startswith("nvt_"), "the worker token is in NUMVAL_TOKEN")
        st, b, _ = d.request("POST", "/api/v1/worker/claim",
                             headers={"Authorization": "Bearer " + token},
                             body={"device": "steady", "wait_ms": 0})
        check(st == 204, "the minted worker token is accepted for claims (%s)" % st)
        with open(pid_file) as f:
            pid = int(f.read())
        rc, reports = d.stop()
        check(rc == 0 and not reports, "SIGTERM: numvald exits 0 (%s %s)" % (rc, reports[:2]))
        gone = False
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                gone = True
                break
            time.sleep(0.1)
        check(gone, "the worker process %d was stopped with numvald" % pid)


if __name__ == "__main__":
    main(test)
