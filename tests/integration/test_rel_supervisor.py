#!/usr/bin/env python3
"""Supervised workers: the worker token is not on their command line (any
local user reads /proc/PID/cmdline) but in their environment (owner-only); a
worker whose lease expired while it lives (SIGSTOP) is killed and its slot
restarted, so the job runs on the new worker; workers exit when numvald is
killed (parent-death signal). Also numval-worker --token-file: refused when
group/other can read it, used when mode 600. Real numvald and numval-worker."""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvdaemon import Daemon, check, main  # noqa: E402

SPEC = {"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[4]], "seed": 7,
        "device": "emu0"}


def children(ppid):
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                st = f.read()
        except OSError:
            continue
        fields = st.rsplit(")", 1)[1].split()
        if int(fields[1]) == ppid and fields[0] != "Z":
            out.append(int(name))
    return out


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(what, fn, timeout=60):
    # A deadline for an event, not a timing threshold: the event must happen at all.
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.1)
    check(False, "%s within %d s" % (what, timeout))


def metric(d, name):
    st, b, _ = d.request("GET", "/metrics", scope="read")
    for line in b.decode().splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    return None


def job_state(d, jid):
    st, b, _ = d.request("GET", "/api/v1/jobs/%s" % jid, scope="read")
    return b["job"] if st == 200 else None


def token_file(d, worker):
    """--token-file: mode 644 refused with a message, mode 600 runs a job."""
    path = os.path.join(d.tmp, "worker.token")
    with open(path, "w") as f:
        f.write(d.token("worker") + "\n")
    os.chmod(path, 0o644)
    argv = [worker, "--server", "http://127.0.0.1:%d" % d.port, "--token-file", path,
            "--device", "manual0", "--backend", "emu", "--once", "--claim-wait-ms", "1000"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMVAL_")}
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    check(p.returncode == 2 and "chmod 600" in p.stderr and "mode 644" in p.stderr,
          "a token file others can read is refused (%s: %s)" % (p.returncode, p.stderr.strip()))
    os.chmod(path, 0o600)
    st, b, _ = d.request("POST", "/api/v1/jobs", body=dict(SPEC, device="manual0"),
                         scope="submit")
    check(st == 201, "job for the manual worker accepted")
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    job = job_state(d, b["job"]["id"])
    check(p.returncode == 0 and job["state"] == "passed",
          "a worker with --token-file (mode 600) ran the job (%s, %s)" %
          (p.returncode, job["state"]))


SLOW = r"""#!/usr/bin/env python3
# A live but slow worker: claims a job, lets its lease expire, then claims again
# (as numval-worker does after a 409) and finishes the job it gets.
import json, os, sys, time, urllib.request
a = sys.argv
url, dev = a[a.index("--server") + 1], a[a.index("--device") + 1]
def call(path, body):
    r = urllib.request.Request(url + path, json.dumps(body).encode(), method="POST",
        headers={"Authorization": "Bearer " + os.environ["NUMVAL_TOKEN"],
                 "Content-Type": "application/json"})
    with urllib.request.urlopen(r, timeout=60) as f:
        return json.loads(f.read() or b"null")
claim = {"device": dev, "wait_ms": 20000, "worker_id": os.environ["NUMVAL_WORKER_ID"]}
first = None
while not first:
    first = call("/api/v1/worker/claim", claim)
time.sleep(%(stall)f)  # the lease (lease_ms) expires meanwhile
again = None
while not again:
    again = call("/api/v1/worker/claim", claim)
j = again["job"]
res = {"verdict": "passed", "cases": [{"index": 0, "verdict": "passed", "op": "exp",
       "dtype": "fp32", "max_ulp": 0.5}]}
call("/api/v1/worker/result", {"job_id": j["id"], "lease_token": j["lease_token"],
                               "result": res})
with open(%(done)r, "w") as f:
    f.write("%%d %%d\n" %% (first["job"]["id"], j["id"]))
time.sleep(300)
"""


def slow_worker(numvald):
    """A worker that lost a lease but claims again in time is not killed."""
    with Daemon(numvald, limits={"lease_ms": 1500, "max_attempts": 5}) as d:
        script = os.path.join(d.tmp, "slow.py")
        done = os.path.join(d.tmp, "done")
        with open(script, "w") as f:
            f.write(SLOW % {"stall": 2.0, "done": done})
        os.chmod(script, 0o700)
        with open(d.conf, "a") as f:
            f.write("\n[device slow0]\nbackend = emu\nslots = 1\nworker = %s\n" % script)
        d.start()
        pid = wait_for("the slow worker started", lambda: children(d.proc.pid))[0]
        st, b, _ = d.request("POST", "/api/v1/jobs", body=dict(SPEC, device="slow0"),
                             scope="submit")
        jid = b["job"]["id"]
        wait_for("the slow worker finished job %s" % jid, lambda: os.path.exists(done))
        job = job_state(d, jid)
        check(job["state"] == "passed" and job["attempt"] == 2,
              "its lease expired once, it claimed the job again and passed it (attempt %d)"
              % job["attempt"])
        st, b, _ = d.request("GET", "/api/v1/devices/slow0", scope="read")
        check(alive(pid) and b["device"]["restarts"] == 0,
              "the live worker that claimed again was not killed (restarts %d)"
              % b["device"]["restarts"])


def test(numvald):
    slow_worker(numvald)
    worker = sys.argv[2]
    with Daemon(numvald, limits={"lease_ms": 1500, "max_attempts": 5}) as d:
        with open(d.conf, "a") as f:
            f.write("\n[device emu0]\nbackend = emu\nslots = 1\nworker = %s\n" % worker)
        d.start()
        d.token("read")
        d.token("submit")
        first = wait_for("a supervised worker started", lambda: children(d.proc.pid))[0]
        with open("/proc/%d/cmdline" % first, "rb") as f:
            argv = [a.decode() for a in f.read().split(b"\0") if a]
        check("--device" in argv and "emu0" in argv, "found the worker: %s" % " ".join(argv))
        check("--token" not in argv and not any("nvt_" in a for a in argv),
              "no token in the worker's /proc/PID/cmdline")
        env_mode = os.stat("/proc/%d/environ" % first).st_mode & 0o777
        check(env_mode & 0o077 == 0, "its environment is readable by its owner alone (%o)"
              % env_mode)

        # The worker authenticates with the token from its environment.
        st, b, _ = d.request("POST", "/api/v1/jobs", body=SPEC, scope="submit")
        jid = b["job"]["id"]
        wait_for("job %s passed on the supervised worker" % jid,
                 lambda: job_state(d, jid)["state"] == "passed")
        check(True, "the supervised worker ran job %s" % jid)

        # SIGSTOP the worker while its claim is parked: the next job is leased to it,
        # the lease expires, the supervisor kills and replaces it, the job passes.
        wait_for("the worker's claim parked", lambda: metric(d, "numvald_claims_waiting") == 1)
        os.kill(first, signal.SIGSTOP)
        try:
            st, b, _ = d.request("POST", "/api/v1/jobs", body=dict(SPEC, seed=8), scope="submit")
            jid = b["job"]["id"]
            job = wait_for("job %s passed after its worker was stopped" % jid,
                           lambda: (lambda j: j if j["state"] == "passed" else None)(
                               job_state(d, jid)))
        finally:
            if alive(first):
                os.kill(first, signal.SIGCONT)
        check(job["attempt"] >= 2, "it ran on a later attempt (%d)" % job["attempt"])
        check(not alive(first), "the stopped worker %d was killed" % first)
        second = wait_for("a new worker in the slot",
                          lambda: [p for p in children(d.proc.pid) if p != first])[0]
        st, b, _ = d.request("GET", "/api/v1/devices/emu0", scope="read")
        last = b["device"].get("last_crash") or ""
        check("lost the lease of job %s" % jid in last,
              "the device's last crash names the lost lease: %s" % last)

        token_file(d, worker)

        # numvald killed alone (not its process group): the worker follows.
        os.kill(d.proc.pid, signal.SIGKILL)
        d.proc.wait(timeout=30)
        try:
            wait_for("worker %d exited after numvald was killed" % second,
                     lambda: not alive(second), timeout=30)
        finally:
            if alive(second):  # the failure case: no process of ours stays behind
                os.kill(second, signal.SIGKILL)
        check(True, "the worker did not outlive numvald")


if __name__ == "__main__":
    main(test)
