#!/usr/bin/env python3
"""Webhooks against a local receiver, with real processes.

A Python HTTP receiver on 127.0.0.1 answers the first request it ever gets
with 500 and every later one with 204; numvald must retry that delivery (same
X-Numval-Delivery id, X-Numval-Attempt 2) and sign every body with
HMAC-SHA256 under the configured secret (checked here with Python's hmac, an
independent implementation). Events:

- promoted and regression: the dropsum plugin without its fault passes a sum
  job on build r1; with the fault it fails the same job on build r2. The
  failure is promoted (a new suite case) and r2 newly fails a case its
  predecessor r1 passed.
- schedule_failed: a cron slot ("* * * * *") runs a suite whose exp job
  demands 1 ULP of the emulator's fast exp, which it does not meet. The slot
  fires while no worker serves its device; numvald is restarted (SIGTERM) with
  the job still queued, then the worker starts: the restarted numvald watches
  the slot it fired before and sends its schedule_failed.

A second webhook points at a port nobody listens on: numvald keeps serving
while its deliveries fail, drops them after max_attempts (logged), and stops
promptly on SIGTERM.

usage: test_webhooks.py NUMVALD NUMVAL-WORKER NUMVALCTL PLUGIN_DROPSUM_SO"""
import hashlib
import hmac
import http.server
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request

from nvservice import Service, check, free_port, main

PLUGIN = sys.argv.pop(4) if len(sys.argv) > 4 else ""
SECRET = "s3cret-for-the-test"

# As in test_suite_promote.py: the stored pairwise bound (Higham 4.2) fails the
# dropped element and passes the correct fp64-accumulated sum.
SUM = {"kind": "op", "op": "sum", "dtypes": ["fp32"], "shapes": [[2, 8192]],
       "inputs": ["normal"], "seed": 11, "attrs": {"axis": -1}}
PAIRWISE = {"op": "sum", "dtype": "fp32",
            "tolerance": {"metric": "bound", "c": 1, "growth": "log2n",
                          "reason_code": "reduction_length",
                          "reason": "pairwise-or-better fp32 summation, Higham 4.2"}}
# The emulator's fast exp exceeds 1 ULP on 2048 normal inputs (test_suite_promote's
# compare check relies on the same).
NIGHTLY = {"name": "nightly-it", "jobs": [
    {"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[2048]], "inputs": ["normal"],
     "seed": 3, "tolerance": {"metric": "ulp", "max_ulp": 1, "reason_code": "approximation_error",
                              "reason": "webhook test: exp documented to 1 ulp"}}]}


class Receiver(http.server.BaseHTTPRequestHandler):
    got = []
    lock = threading.Lock()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with Receiver.lock:
            first = not Receiver.got
            Receiver.got.append((dict(self.headers), body))
        self.send_response(500 if first else 204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


def events(kind=None):
    with Receiver.lock:
        got = list(Receiver.got)
    out = []
    for h, body in got:
        ev = json.loads(body)
        if kind is None or ev["event"] == kind:
            out.append((h, body, ev))
    return out


def wait_for(kind, timeout):
    """The deliveries of one event kind, each once (a retried delivery is
    received more than once under its one id)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        e, ids = [], set()
        for x in events(kind):
            if x[2]["id"] not in ids:
                ids.add(x[2]["id"])
                e.append(x)
        if e:
            return e
        time.sleep(0.3)
    return []


def test(bins):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    dead = free_port()
    conf = "\n".join([
        "", "[webhook ci]", "url = http://127.0.0.1:%d/hook" % srv.server_address[1],
        "events = promoted, regression, schedule_failed", "secret = " + SECRET,
        "backoff_ms = 200", "max_attempts = 4", "timeout_ms = 5000", "",
        "[webhook dead]", "url = http://127.0.0.1:%d/" % dead, "events = promoted",
        "backoff_ms = 100", "max_attempts = 3", "timeout_ms = 1000", "",
        "[schedule nightly]", "cron = * * * * *", "suite = %s", "device = later", ""])
    try:
        with Service(bins, lease_ms=4000, extra_conf=conf) as s:
            suite = os.path.join(s.tmp, "nightly.json")
            with open(suite, "w") as f:
                json.dump(NIGHTLY, f)
            with open(s.conf) as f:
                text = f.read()
            with open(s.conf, "w") as f:
                f.write(text.replace("suite = %s", "suite = " + suite))

            # A webhook section that cannot work is refused before start.
            bad = os.path.join(s.tmp, "bad.ini")
            with open(bad, "w") as f:
                f.write(text.replace("events = promoted\n", "events = promoted, nope\n"))
            p = subprocess.run([bins["numvald"], "--config", bad, "--check-config"],
                               capture_output=True, text=True, timeout=60)
            check(p.returncode != 0 and "events" in p.stderr and "[webhook dead]" in p.stderr,
                  "--check-config refuses an unknown event: %s" % p.stderr.strip()[-200:])

            s.start_daemon()
            s.start_worker("good", "plugin:%s?fault=none" % PLUGIN)
            s.start_worker("bad", "plugin:%s?fault=drop" % PLUGIN)
            st, _ = s.api("POST", "/api/v1/tolerances", PAIRWISE)
            check(st == 201, "stored tolerance sum/fp32: the pairwise bound")
            ids = {}
            for b, dev in (("r1", "good"), ("r2", "bad")):
                st, body = s.api("POST", "/api/v1/jobs", dict(SUM, device=dev,
                                 build={"name": "kernels", "version": b}), scope="submit")
                check(st == 201, "sum job on %s submitted" % b)
                ids[b] = body["job"]["id"]
                # r1 before r2: the predecessor is the build seen first.
                s.wait_jobs([ids[b]], 240)
            check(s.job(ids["r1"])["state"] == "passed" and s.job(ids["r2"])["state"] == "failed",
                  "r1 passes, r2 fails")

            pro = wait_for("promoted", 60)
            check(len(pro) >= 1, "a promoted event arrived")
            st, suite_list = s.api("GET", "/api/v1/suite", scope="read")
            sc = [c for c in suite_list["suite"] if c["origin_job"] == int(ids["r2"])]
            ev = [e for _, _, e in pro if e["data"]["job_id"] == int(ids["r2"])]
            check(len(sc) == 1 and len(ev) == 1 and
                  ev[0]["data"]["suite_case"]["id"] == sc[0]["id"] and
                  ev[0]["data"]["suite_case"]["signature"] == sc[0]["signature"] and
                  ev[0]["data"]["suite_case"]["first_failing_build"]["name"] == "kernels",
                  "promoted: the new suite case of job %s, as GET /api/v1/suite lists it"
                  % ids["r2"])

            reg = wait_for("regression", 60)
            check(len(reg) == 1, "one regression event")
            d = reg[0][2]["data"]
            check(d["build"]["identity"]["version"] == "r2" and
                  d["predecessor"]["identity"]["version"] == "r1" and d["kind"] == "op" and
                  d["op"] == "sum" and d["job_id"] == int(ids["r2"]) and d["newly_failing"] >= 1
                  and d["cases"][0]["base"]["verdict"] == "passed" and
                  d["cases"][0]["head"]["verdict"] == "failed",
                  "regression: r2 against its predecessor r1, %d newly failing sum case(s)"
                  % d["newly_failing"])

            everything = events()
            first_h, _, first = everything[0]
            again = [(h, e) for h, _, e in everything[1:] if e["id"] == first["id"]]
            check(again and again[0][0]["X-Numval-Attempt"] == "2" and
                  first_h["X-Numval-Attempt"] == "1",
                  "the delivery answered 500 was retried: %s attempt 2" % first["id"])
            # The dead receiver: numvald serves on, drops after 3 attempts, logs it.
            with urllib.request.urlopen(s.url + "/healthz", timeout=10) as r:
                check(r.status == 200, "numvald answers while a receiver is down")
            deadline = time.time() + 60
            while time.time() < deadline and "dropped after 3 attempts" not in s.tail(20000):
                time.sleep(0.5)
            check("webhook 'dead': promoted" in s.tail(20000) and
                  "dropped after 3 attempts" in s.tail(20000),
                  "the dead webhook's delivery dropped after 3 attempts (logged)")
            with urllib.request.urlopen(s.url + "/metrics", timeout=10) as r:
                m = dict(l.rsplit(" ", 1) for l in r.read().decode().splitlines()
                         if l.startswith("numvald_webhook_"))
            check(int(m["numvald_webhook_delivered_total"]) >= 2 and
                  int(m["numvald_webhook_failed_attempts_total"]) >= 1 + 3 and
                  int(m["numvald_webhook_dropped_total"]) >= 1,
                  "/metrics counts deliveries, failed attempts and drops: %s" % m)
            deadline, fired = time.time() + 150, []
            while time.time() < deadline and not fired:
                st, body = s.api("GET", "/api/v1/schedules", scope="read")
                last = (body or {}).get("schedules", [{}])[0].get("last_run") or {}
                fired = last.get("job_ids") or []
                time.sleep(0.5)
            check(len(fired) == 1 and s.job(fired[0])["state"] == "queued",
                  "the slot fired: job %s queued, no worker serves device 'later'" % fired)
            proc = s.daemon
            s.kill_daemon(15)
            check(proc.returncode == 0, "numvald stopped (SIGTERM) with the slot's job queued")
            s.start_daemon()
            s.start_worker("later", "emu:transcendental=fast")
            deadline, sf = time.time() + 150, []
            while time.time() < deadline and not sf:
                sf = [e for e in wait_for("schedule_failed", 5) or []
                      if e[2]["data"]["job_ids"] == fired]
            check(len(sf) == 1, "after the restart, the slot fired before it sent schedule_failed")
            d = sf[0][2]["data"] if sf else {}
            check(d.get("schedule") == "nightly" and d.get("device") == "later" and
                  d.get("jobs") == 1 and d["not_passed"][0]["state"] == "failed" and
                  d["not_passed"][0]["id"] == fired[0] and d["error"] is None,
                  "schedule_failed: slot %s, its job %s failed" % (d.get("slot"), fired))

            everything = events()
            for h, body, e in everything:
                want = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
                if h.get("X-Numval-Signature") != want or h.get("X-Numval-Event") != e["event"]:
                    check(False, "signature of %s %s: %s" % (e["event"], e["id"],
                                                             h.get("X-Numval-Signature")))
            check(True, "all %d requests signed: HMAC-SHA256 of the body under the secret"
                  % len(everything))

            proc = s.daemon
            s.kill_daemon(15)  # waits for the exit (and fails the test past 30 s)
            check(proc.returncode == 0, "numvald exits 0 on SIGTERM with a receiver down")
    finally:
        srv.shutdown()


if __name__ == "__main__":
    main(test)
