#!/usr/bin/env python3
"""What numvald's Slurm pool hands sbatch, and what it does when sbatch fails,
without a cluster: the pool's sbatch and squeue are stand-ins that record
their arguments and environment. Checks: each [pool] value arrives as one
argument of its option, the token in sbatch's environment only, the worker's
command line after the job script; a failing sbatch puts the device in
backoff with sbatch's message and numvald tries again later, a working one
brings it back online; a restarted numvald keeps the pool's token (the
workers Slurm still runs hold it)."""
import json
import os
import re
import signal
import stat
import time
import urllib.request

from nvservice import Fail, Service, check, main

FAKE_SBATCH = r"""#!/usr/bin/env python3
import json, os, sys
d = os.path.dirname(os.path.abspath(__file__))
calls = os.path.join(d, "sbatch.calls")
n = sum(1 for _ in open(calls)) if os.path.exists(calls) else 0
with open(calls, "a") as f:
    f.write(json.dumps({"argv": sys.argv[1:], "token": os.environ.get("NUMVAL_TOKEN")}) + "\n")
if n < 2:
    sys.stderr.write("sbatch: error: Batch job submission failed: Invalid partition name "
                     "specified\n")
    sys.exit(1)
print("%d" % (100 + n))
"""

FAKE_SQUEUE = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/squeue.calls"
exit 0
"""


def write_exe(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, stat.S_IRWXU)


def calls(tmp):
    p = os.path.join(tmp, "sbatch.calls")
    if not os.path.exists(p):
        return []
    with open(p) as f:
        return [json.loads(l) for l in f if l.strip()]


def device(s, name):
    st, body = s.api("GET", "/api/v1/devices", scope="read")
    return {d["name"]: d for d in body["devices"]}.get(name, {}) if st == 200 else {}


def wait_for(what, cond, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    raise Fail("no %s within %d s" % (what, timeout))


def test(bins):
    s = Service(bins, lease_ms=3000)
    with s:
        sbatch, squeue = os.path.join(s.tmp, "sbatch"), os.path.join(s.tmp, "squeue")
        write_exe(sbatch, FAKE_SBATCH)
        write_exe(squeue, FAKE_SQUEUE)
        with open(s.conf, "a") as f:
            f.write("\n".join([
                "", "[pool p1]", "device = dev-p1", "backend = emu:transcendental=fast",
                "partition = gpu,gpu2", "gres = gpu:a100:1", "time_limit = 1-00:00:00",
                "account = lab", "qos = high", "constraint = [a100*2&ib]", "max_workers = 3",
                "idle_exit = 77", "threads = 2", "interval_ms = 200", "drain_before = 90",
                "server = https://numval.example:8443", "worker = /opt/numval/bin/numval-worker",
                "output = /shared/w-%A_%a.log", "export_env = PATH,LD_LIBRARY_PATH",
                "sbatch = " + sbatch, "squeue = " + squeue, ""]))
        s.start_daemon()
        token_file = os.path.join(s.data, "pool-p1.token")
        with open(token_file) as f:
            token = f.read().strip()
        for i in range(5):
            st, body = s.api("POST", "/api/v1/jobs",
                             {"kind": "op", "op": "add", "dtypes": ["fp32"], "shapes": [[8]],
                              "inputs": ["normal"], "layouts": ["contiguous"], "seed": i,
                              "device": "dev-p1"}, scope="submit")
            check(st == 201, "job %d for the pool's device accepted" % i)

        dev = wait_for("backoff state", lambda: (lambda d: d if d.get("state") == "backoff"
                                                  else None)(device(s, "dev-p1")))
        check("Invalid partition name" in (dev.get("last_crash") or ""),
              "a failing sbatch: the device in backoff with sbatch's message (%s)" %
              dev.get("last_crash"))
        check("next try in" in s.tail(100000), "numvald logs when it tries again")
        wait_for("a third sbatch call", lambda: len(calls(s.tmp)) >= 3)
        wait_for("online state", lambda: device(s, "dev-p1").get("state") == "online")
        check(True, "after sbatch works again the device is online")
        c = calls(s.tmp)
        check(len(c) >= 3 and all(x["argv"] == c[0]["argv"] for x in c[:3]),
              "the retries submit the same thing")
        argv = c[2]["argv"]
        script = os.path.join(s.data, "slurm-worker.sh")
        opts = argv[:argv.index(script)] if script in argv else []
        want = ["--parsable", "--job-name=numval-p1", "--array=0-2", "--partition=gpu,gpu2",
                "--gres=gpu:a100:1", "--time=1-00:00:00", "--account=lab", "--qos=high",
                "--constraint=[a100*2&ib]", "--output=/shared/w-%A_%a.log", "--chdir=/tmp",
                "--export=NUMVAL_TOKEN,PATH,LD_LIBRARY_PATH", "--signal=B:USR1@90"]
        check(opts == want, "sbatch gets one argument per [pool] value, 3 array tasks for 5 "
              "queued jobs and max_workers = 3 (%s)" % opts)
        worker = argv[len(opts) + 1:]
        check(worker == ["/opt/numval/bin/numval-worker", "--server",
                         "https://numval.example:8443", "--device", "dev-p1", "--backend",
                         "emu:transcendental=fast", "--idle-exit", "77", "--threads", "2"],
              "the job script's arguments are the worker's command line (%s)" % worker)
        with open(script) as f:
            check(f.read().rstrip().endswith('exec "$@"'), "the job script runs its arguments")
        check(all(x["token"] == token for x in c) and not any(token in a for x in c
                                                              for a in x["argv"]),
              "the token in sbatch's environment, on no command line")
        check(os.stat(token_file).st_mode & 0o777 == 0o600, "the token file is mode 600")
        with open(os.path.join(s.tmp, "squeue.calls")) as f:
            q = f.readline().split()
        check("--me" in q and "--name=numval-p1" in q and "--array" in q,
              "squeue asks for our jobs of the pool's name, one line per array task (%s)" % q)

        with urllib.request.urlopen(s.url + "/metrics", timeout=30) as r:
            metrics = r.read().decode()
        sub = re.search(r'^numvald_pool_submitted_total\{pool="p1"\} (\d+)$', metrics, re.M)
        fails = re.search(r'^numvald_pool_call_failures_total\{pool="p1"\} (\d+)$', metrics,
                          re.M)
        ok_calls = sum(1 for x in calls(s.tmp)) - 2
        check(sub and fails and int(fails.group(1)) == 2 and int(sub.group(1)) >= 3 and
              int(sub.group(1)) % 3 == 0 and int(sub.group(1)) <= 3 * ok_calls,
              "/metrics: 2 failed calls, 3 workers per accepted sbatch (%s, %s)" %
              (sub and sub.group(0), fails and fails.group(0)))
        check('numvald_pool_workers{pool="p1",state="pending"} 0' in metrics,
              "/metrics: the pool's Slurm jobs as squeue last said (none)")

        # The token survives a restart and still claims for the device.
        s.kill_daemon(signal.SIGTERM)
        s.start_daemon()
        with open(token_file) as f:
            check(f.read().strip() == token, "a restarted numvald keeps the pool's token")
        req = urllib.request.Request(s.url + "/api/v1/worker/claim", method="POST",
                                     data=json.dumps({"device": "dev-p1", "wait_ms": 0}).encode())
        req.add_header("Authorization", "Bearer " + token)
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=30) as r:
            check(r.status in (200, 204), "the kept token still claims for the device (%d)" %
                  r.status)


if __name__ == "__main__":
    main(test)
