#!/usr/bin/env python3
"""numvald --check-config validates every device's backend spec through the
worker that will run it (`numval-worker check-backend SPEC`): emu options are
parsed, a plugin is loaded with its ABI checked and one context opened, an
exec backend's program must be an executable (the harness is not started).
A bad spec is refused naming the device, the spec and what is wrong; a good
configuration is reported OK. The plugin used is the project's test plugin
(tests/integration/plugin_misbehave.c) built next to this test.

usage: test_check_config.py NUMVALD NUMVAL-WORKER NUMVALCTL PLUGIN_SO"""
import os
import subprocess
import sys
import tempfile

from nvservice import check, main

PLUGIN = sys.argv.pop(4) if len(sys.argv) > 4 else ""


def worker_check(bins, spec):
    p = subprocess.run([bins["worker"], "check-backend", spec], capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stdout + p.stderr


def daemon_check(bins, tmp, devices):
    ini = os.path.join(tmp, "numvald.ini")
    with open(ini, "w") as f:
        f.write("[server]\nlisten = 127.0.0.1:0\ndata_dir = %s\nworker = %s\n"
                % (os.path.join(tmp, "data"), bins["worker"]))
        for name, spec in devices:
            f.write("[device %s]\nbackend = %s\n" % (name, spec))
    p = subprocess.run([bins["numvald"], "--config", ini, "--check-config"], capture_output=True,
                       text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def test(bins):
    rc, out = worker_check(bins, "emu:accum=bf16,reduce=pairwise")
    check(rc == 0 and "OK" in out, "emu spec with options: OK")
    rc, out = worker_check(bins, "emu:accum=zz")
    check(rc == 2 and "'zz'" in out and "accum" in out, "bad emu value named: %s" % out.strip())
    rc, out = worker_check(bins, "emu:nokey=1")
    check(rc == 2 and "'nokey'" in out, "unknown emu key named: %s" % out.strip())
    rc, out = worker_check(bins, "exec:numval-no-such-program --x")
    check(rc == 2 and "'numval-no-such-program'" in out and "PATH" in out,
          "exec program not on PATH named: %s" % out.strip())
    rc, out = worker_check(bins, "exec:%s --flag" % sys.executable)
    check(rc == 0, "exec program found (not started): %s" % out.strip())
    rc, out = worker_check(bins, "plugin:/nonexistent/libx.so")
    check(rc == 2 and "/nonexistent/libx.so" in out, "missing plugin named: %s" % out.strip())
    if PLUGIN:
        rc, out = worker_check(bins, "plugin:" + PLUGIN)
        check(rc == 0, "test plugin loads and opens: %s" % out.strip())
    rc, out = worker_check(bins, "gpu:0")
    check(rc == 2 and "'gpu'" in out, "unknown backend kind named: %s" % out.strip())

    with tempfile.TemporaryDirectory(prefix="nv-checkcfg-") as tmp:
        rc, out = daemon_check(bins, tmp, [("emu0", "emu"), ("emu1", "emu:accum=bf16")])
        check(rc == 0 and "configuration OK" in out and "2 device(s)" in out,
              "good configuration: OK (%s)" % out.strip())
        rc, out = daemon_check(bins, tmp, [("emu0", "emu"), ("bad1", "emu:rounding=sideways"),
                                           ("bad2", "plugin:/nonexistent/libx.so")])
        check(rc == 2 and "device 'bad1'" in out and "'sideways'" in out
              and "device 'bad2'" in out and "configuration OK" not in out
              and "device 'emu0'" not in out,
              "bad devices refused, each named with its spec: %s" % out.strip()[-600:])


if __name__ == "__main__":
    main(test)
