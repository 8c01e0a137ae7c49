#!/usr/bin/env python3
"""kill -9 numvald with 200 jobs queued, leased or running: after a restart
every job is still there with its spec, expired leases are requeued with the
attempt counter kept, and finishing every job stores each case exactly once
(a retried result upload is a duplicate, not new cases). Workers are played
over the API; the end-to-end version with real workers is the agent's test."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvdaemon import Daemon, check, main  # noqa: E402

N = 200


def claim(d, wait_ms=0):
    st, b, _ = d.request("POST", "/api/v1/worker/claim", scope="worker",
                         body={"device": "emu0", "wait_ms": wait_ms})
    return b["job"] if st == 200 else None


def all_jobs(d):
    out, cursor = [], None
    while True:
        path = "/api/v1/jobs?limit=70" + ("&cursor=" + cursor if cursor else "")
        st, b, _ = d.request("GET", path)
        out += b["jobs"]
        cursor = b["next_cursor"]
        if not cursor:
            return {j["id"]: j for j in out}


def result_for(job):
    n = 2 + job["id"] % 3
    cases = [{"index": i, "verdict": "passed", "op": "exp", "dtype": "fp32", "max_ulp": 0.5}
             for i in range(n)]
    return {"verdict": "passed", "cases": cases}


def test(numvald):
    with Daemon(numvald, limits={"lease_ms": 4000, "max_attempts": 5}) as d:
        d.start()
        specs = {}
        for i in range(N):
            spec = {"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[4]], "seed": i,
                    "priority": i % 3}
            st, b, _ = d.request("POST", "/api/v1/jobs", body=spec, scope="submit")
            if st != 201:
                check(False, "submit %d: %s %s" % (i, st, b))
            specs[b["job"]["id"]] = spec
        check(len(specs) == N, "%d jobs submitted" % N)
        leased = [claim(d) for _ in range(20)]
        for j in leased[:10]:  # the first of these finishes below
            d.request("POST", "/api/v1/worker/heartbeat", scope="worker",
                      body={"job_id": j["id"], "lease_token": j["lease_token"],
                            "cases_done": 1, "cases_total": 4})
        first = leased[0]
        st, b, _ = d.request("POST", "/api/v1/worker/result", scope="worker",
                             body={"job_id": first["id"], "lease_token": first["lease_token"],
                                   "result": result_for(first)})
        check(st == 200 and not b["duplicate"], "one job finished before the crash")

        check(d.kill(signal.SIGKILL) == -signal.SIGKILL, "numvald killed with SIGKILL")
        d.start()
        jobs = all_jobs(d)
        check(len(jobs) == N and set(jobs) == set(specs), "all %d jobs there after restart" % N)
        check(all(jobs[i]["spec"] == specs[i] for i in specs), "every spec intact")
        states = [j["state"] for j in jobs.values()]
        check(states.count("passed") == 1 and states.count("queued") == N - 20 and
              states.count("running") == 9 and states.count("leased") == 10,
              "states kept: 1 passed, 9 running, 10 leased, 180 queued (%s)" %
              {s: states.count(s) for s in set(states)})
        st, b, _ = d.request("POST", "/api/v1/worker/result", scope="worker",
                             body={"job_id": first["id"], "lease_token": first["lease_token"],
                                   "result": result_for(first)})
        check(st == 200 and b["duplicate"], "retried upload after the restart is a duplicate")

        time.sleep(4.5)  # the 19 live leases (4 s) expire
        done = 1
        deadline = time.time() + 120
        while done < N and time.time() < deadline:
            j = claim(d, wait_ms=500)
            if not j:
                continue
            body = {"job_id": j["id"], "lease_token": j["lease_token"], "result": result_for(j)}
            st, b, _ = d.request("POST", "/api/v1/worker/result", scope="worker", body=body)
            if st == 200 and not b["duplicate"]:
                done += 1
                if done % 50 == 0:  # an upload retried, e.g. after a lost response
                    st, b, _ = d.request("POST", "/api/v1/worker/result", scope="worker",
                                         body=body)
                    check(st == 200 and b["duplicate"], "retry of job %d is a duplicate" % j["id"])
        check(done == N, "all %d jobs completed (%d)" % (N, done))
        jobs = all_jobs(d)
        check(all(j["state"] == "passed" for j in jobs.values()), "every job passed")
        requeued = [j for j in jobs.values() if j["attempt"] == 2]
        check(len(requeued) == 19, "the 19 jobs leased at the crash ran as attempt 2")
        for jid, j in jobs.items():
            want = 2 + jid % 3
            st, b, _ = d.request("GET", "/api/v1/jobs/%d/cases?limit=100" % jid)
            idx = [c["index"] for c in b["cases"]]
            if idx != list(range(want)) or j["cases_total"] != want:
                check(False, "job %d has cases %s, want 0..%d" % (jid, idx, want - 1))
        check(True, "every job has each case exactly once")


if __name__ == "__main__":
    main(test)
