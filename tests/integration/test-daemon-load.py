#!/usr/bin/env python3
"""Load and faults on a real numvald while a real numval-worker runs a job:

- 20 connections at a time holding one body byte of an artifact PUT without a
  token (they took the whole body budget: every write got 503 and a running
  job ended in error, "lease expired on attempt 3 of 3");
- GET /api/v1/compare of 2 builds x CASES cases (it blocked the loop for
  seconds, /healthz waiting as long);
- submits of 2 MiB, over the 1 MiB job-body limit, refused.

Asserted: the job completes (passed, on its first attempt); every /healthz
sent during the load is answered 200; a /healthz sent while a compare is being
computed is answered before the compare (before the fix the compare held the
loop, so it never was). No timing threshold: the latencies are measured and
printed (docs/RELIABILITY.md quotes them), not judged."""
import http.client
import json
import os
import select
import socket
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvservice import Fail, Service, check, main  # noqa: E402

# Cases per build. The documented limit is 200,000; 50,000 keeps the test
# under a minute while a compare still takes seconds on the development
# machine (printed below; the check that needs it says so if it does not).
CASES = int(os.environ.get("NV_LOAD_CASES", "50000"))
SPEC = {"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[8]], "inputs": ["normal"],
        "seed": 3}
# The job the real worker runs under the load: a few seconds on emu, with
# heartbeats every lease_ms / 3.
JOB = {"kind": "op", "op": "exp", "dtypes": ["fp32", "bf16", "fp16"],
       "shapes": [[4096], [64, 257], [128, 129], [9000], [300, 300]],
       "layouts": ["contiguous", "transposed"],
       "inputs": ["normal", "uniform", "large", "near_zero"], "seed": 5, "device": "emu-load"}


def conn(s, timeout=30):
    return http.client.HTTPConnection("127.0.0.1", s.port, timeout=timeout)


def call(s, method, path, body=None, scope=None, timeout=120):
    c = conn(s, timeout)
    h = {"Content-Type": "application/json"}
    if scope:
        h["Authorization"] = "Bearer " + s.token(scope)
    try:
        c.request(method, path, body=json.dumps(body).encode() if body is not None else None,
                  headers=h)
        r = c.getresponse()
        raw = r.read()
        return r.status, (json.loads(raw) if raw else None)
    finally:
        c.close()


def build_cases(s, name):
    """Jobs of build `name` with CASES passed op cases in all, uploaded as a
    worker (at most 100,000 per job: NV_JOB_MAX_CASES)."""
    for first in range(0, CASES, 100000):
        n = min(100000, CASES - first)
        st, body = call(s, "POST", "/api/v1/jobs",
                        dict(SPEC, device="fake-" + name, build={"name": name}), scope="submit")
        if st != 201:
            raise Fail("submit for build %s: %s %s" % (name, st, body))
        st, claim = call(s, "POST", "/api/v1/worker/claim", {"device": "fake-" + name},
                         scope="worker")
        if st != 200:
            raise Fail("claim for build %s: %s %s" % (name, st, claim))
        job = claim["job"]
        cases = [{"index": i, "verdict": "passed", "op": "exp", "dtype": "fp32",
                  "input": "normal", "layout": "contiguous", "shape": [first + i + 1],
                  "max_ulp": 0.5 if name == "load-a" else 0.75} for i in range(n)]
        result = {"verdict": "passed", "cases": cases,
                  "summary": {"cases": n, "passed": n, "failed": 0, "errors": 0}}
        st, body = call(s, "POST", "/api/v1/worker/result",
                        {"job_id": job["id"], "lease_token": job["lease_token"],
                         "result": result}, scope="worker")
        if st != 200:
            raise Fail("result for build %s: %s %s" % (name, st, str(body)[:300]))


class Load:
    """The fault threads; each records what it saw."""

    def __init__(self, s):
        self.s = s
        self.stop = threading.Event()
        self.health = []      # (latency s, status)
        self.compares = []    # (seconds, status)
        self.rounds = []      # (compare pending when /healthz was sent, /healthz came first)
        self.refused = {}     # status -> count, for the oversized submits
        self.held = {}        # status -> count, for the unauthenticated PUTs
        self.errors = []
        self.threads = [threading.Thread(target=f, daemon=True) for f in
                        (self.healthz, self.compare, self.big_submits, self.hold_puts)]

    def run(self, f):
        try:
            f()
        except Exception as e:  # recorded, reported by the test
            self.errors.append("%s: %r" % (f.__name__, e))

    def healthz(self):
        def loop():
            while not self.stop.is_set():
                t0 = time.perf_counter()
                st, _ = call(self.s, "GET", "/healthz", timeout=60)
                self.health.append((time.perf_counter() - t0, st))
                time.sleep(0.02)
        self.run(loop)

    def compare(self):
        def loop():
            path = "/api/v1/compare?base=load-a&head=load-b"
            while not self.stop.is_set():
                c = conn(self.s, 120)
                c.connect()
                t0 = time.perf_counter()
                c.request("GET", path)
                # Give the daemon a moment to read it and start matching, then
                # ask /healthz on another connection.
                time.sleep(0.2)
                pending = not select.select([c.sock], [], [], 0)[0]
                st, _ = call(self.s, "GET", "/healthz", timeout=120)
                first = pending and not select.select([c.sock], [], [], 0)[0]
                r = c.getresponse()
                r.read()
                self.compares.append((time.perf_counter() - t0, r.status))
                self.rounds.append((pending, first and st == 200))
                c.close()
        self.run(loop)

    def big_submits(self):
        def loop():
            tok = self.s.token("submit")
            body = b" " * (2 << 20)
            while not self.stop.is_set():
                sk = socket.create_connection(("127.0.0.1", self.s.port), timeout=30)
                try:
                    sk.sendall(("POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                                "Authorization: Bearer %s\r\n\r\n" % (len(body), tok)).encode())
                    try:
                        sk.sendall(body)
                    except OSError:
                        pass  # refused and closed before the whole body went
                    out = sk.recv(4096)
                    st = int(out.split(b" ", 2)[1]) if out.startswith(b"HTTP/1.1 ") else None
                    self.refused[st] = self.refused.get(st, 0) + 1
                finally:
                    sk.close()
                time.sleep(0.05)
        self.run(loop)

    def hold_puts(self):
        def loop():
            path = "/api/v1/worker/artifacts/" + "ab" * 32
            while not self.stop.is_set():
                socks = []
                for _ in range(20):
                    sk = socket.create_connection(("127.0.0.1", self.s.port), timeout=30)
                    sk.sendall(("PUT %s HTTP/1.1\r\nHost: x\r\nContent-Length: 26843545\r\n\r\n"
                                % path).encode() + b"\x28")
                    socks.append(sk)
                # hold them a while (they held the body budget while they lived)
                self.stop.wait(1.0)
                for sk in socks:
                    sk.settimeout(5)
                    try:
                        out = sk.recv(4096)
                    except (socket.timeout, OSError):
                        out = b""
                    st = int(out.split(b" ", 2)[1]) if out.startswith(b"HTTP/1.1 ") else None
                    self.held[st] = self.held.get(st, 0) + 1
                    sk.close()
        self.run(loop)

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=180)


def ms(xs):
    xs = sorted(xs)
    return "median %.1f ms, p99 %.1f ms, max %.1f ms over %d" % (
        1e3 * statistics.median(xs), 1e3 * xs[min(len(xs) - 1, int(0.99 * len(xs)))],
        1e3 * xs[-1], len(xs))


def test(bins):
    with Service(bins, lease_ms=2000, max_attempts=3) as s:
        s.start_daemon()
        t0 = time.perf_counter()
        build_cases(s, "load-a")
        build_cases(s, "load-b")
        print("# set-up: 2 builds x %d cases stored in %.1f s" %
              (CASES, time.perf_counter() - t0), flush=True)
        quiet = []
        for _ in range(20):
            t1 = time.perf_counter()
            st, _ = call(s, "GET", "/healthz")
            quiet.append(time.perf_counter() - t1)
        print("# /healthz without load: " + ms(quiet), flush=True)
        t1 = time.perf_counter()
        st, cmp = call(s, "GET", "/api/v1/compare?base=load-a&head=load-b")
        alone = time.perf_counter() - t1
        check(st == 200 and cmp["counts"]["matched"] == CASES,
              "compare of 2 builds x %d cases: 200, all matched (%.2f s; got %s %s)" %
              (CASES, alone, st, str(cmp)[:200] if st != 200 else cmp["counts"]))

        st, body = call(s, "POST", "/api/v1/jobs", JOB, scope="submit")
        check(st == 201, "job for the worker accepted (%s)" % st)
        job_id = body["job"]["id"]
        load = Load(s)
        load.start()
        s.start_worker("emu-load", "emu")
        try:
            jobs = s.wait_jobs([job_id], timeout=120)
            # keep the load on until at least one compare went through it
            deadline = time.time() + 60
            while len(load.compares) < 1 and time.time() < deadline and not load.errors:
                time.sleep(0.1)
        finally:
            load.finish()
        job = jobs[job_id]
        check(not load.errors, "the load threads ran without an error (%s)" % load.errors[:3])
        check(job["state"] == "passed" and job["attempt"] == 1 and job["error"] is None,
              "under the load the job completed: %s on attempt %d (error %s)" %
              (job["state"], job["attempt"], job["error"]))
        statuses = {st for _, st in load.health}
        check(load.health and statuses == {200},
              "every /healthz during the load answered 200 (%d, statuses %s)" %
              (len(load.health), statuses))
        print("# /healthz under load: " + ms([t for t, _ in load.health]), flush=True)
        print("# compare under load: " + ms([t for t, _ in load.compares]) +
              "; alone %.0f ms" % (1e3 * alone), flush=True)
        pending = [first for was, first in load.rounds if was]
        check(pending, "a /healthz was sent while a compare was in flight (%d rounds; if none, "
              "the compare is too fast to observe: raise NV_LOAD_CASES)" % len(load.rounds))
        check(any(pending), "a /healthz sent during a compare was answered before it "
              "(%d of %d rounds)" % (sum(pending), len(pending)))
        check({st for _, st in load.compares} == {200}, "every compare under load answered 200")
        check(load.held and set(load.held) == {401},
              "the unauthenticated PUTs holding a body byte got 401 (%s)" % load.held)
        check(load.refused and set(load.refused) == {413},
              "the 2 MiB submits got 413 (%s)" % load.refused)
        st, body = call(s, "GET", "/api/v1/jobs?limit=1000")
        n_jobs = 2 * ((CASES + 99999) // 100000) + 1
        check(st == 200 and len(body["jobs"]) == n_jobs,
              "no refused submit was stored (%d jobs: the builds' %d and the worker's)" %
              (len(body["jobs"]), n_jobs - 1))


if __name__ == "__main__":
    main(test)
