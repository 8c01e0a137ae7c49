#!/usr/bin/env python3
"""kill -9 a worker in the middle of a job: the job is requeued when its lease
expires, a second worker runs it, and it completes exactly once (one result:
as many stored cases as the job has, no index twice). Then `numvalctl cancel`
of a running job: the worker hears it on its next heartbeat, stops the job and
is free for the next one."""
import os
import re
import signal
import time

from nvservice import Fail, Service, check, main

# Long enough to be caught mid-run whatever the worker's speed: the test
# plugin as the device, each of its calls made 150 ms longer (delay_ms), so
# the job's 40 cases (5 shapes x 4 inputs x 2 layouts) last at least 6 s.
LONG = {"kind": "op", "op": "exp", "dtypes": ["fp32"],
        "shapes": [[4096], [64, 257], [128, 129], [9000], [300, 300]],
        "layouts": ["contiguous", "transposed"],
        "inputs": ["normal", "uniform", "large", "near_zero"], "seed": 5}
N_CASES = 40


def slow_backend():
    path = os.environ.get("NV_TEST_PLUGIN")
    if not path:
        raise Fail("NV_TEST_PLUGIN (the test plugin's path) is not set; run through meson")
    return "plugin:%s?delay_ms=150" % path


def test(bins):
    with Service(bins, lease_ms=2000, max_attempts=5) as s:
        s.start_daemon()
        st, body = s.api("POST", "/api/v1/jobs", dict(LONG, device="emu0"), scope="submit")
        check(st == 201, "job accepted (%s %s)" % (st, body))
        job_id = body["job"]["id"]
        w1 = s.start_worker("emu0", slow_backend())
        deadline = time.time() + 180
        while time.time() < deadline:
            job = s.job(job_id)
            if job["state"] == "running" and 0 < job["cases_done"] < job["cases_total"]:
                break
            if job["state"] in ("passed", "failed", "error"):
                raise Fail("job finished before the worker could be killed; make it longer")
            time.sleep(0.1)
        else:
            raise Fail("job never reported progress: %s" % s.job(job_id))
        done_at_kill = job["cases_done"]
        s.kill_worker(w1, signal.SIGKILL)
        check(True, "worker killed with SIGKILL at %d/%d cases" %
              (done_at_kill, job["cases_total"]))
        s.start_worker("emu0", slow_backend())
        jobs = s.wait_jobs([job_id], timeout=400)
        job = jobs[job_id]
        check(job["state"] == "passed", "job completed as passed (%s)" % job["state"])
        check(job["attempt"] >= 2, "it took a second attempt (attempt %d)" % job["attempt"])
        cases = s.cases(job_id)
        idx = [c["index"] for c in cases]
        check(len(cases) == job["cases_total"] == N_CASES,
              "exactly one set of cases stored (%d of %d)" % (len(cases), job["cases_total"]))
        check(len(set(idx)) == len(idx), "no case index stored twice")
        check(job["cases_done"] == job["cases_total"], "cases_done equals cases_total")

        st, body = s.api("POST", "/api/v1/jobs", dict(LONG, device="emu0", seed=6),
                         scope="submit")
        check(st == 201, "second long job accepted")
        long_id = body["job"]["id"]
        deadline = time.time() + 180
        while time.time() < deadline:
            job = s.job(long_id)
            if job["state"] == "running" and 0 < job["cases_done"] < job["cases_total"]:
                break
            time.sleep(0.1)
        p = s.ctl("cancel", str(long_id))
        check(p.returncode == 0 and p.stdout.split() == [str(long_id), "cancelled"],
              "numvalctl cancel (%s%s)" % (p.stdout, p.stderr))
        st, body = s.api("POST", "/api/v1/jobs",
                         {"kind": "op", "op": "add", "dtypes": ["fp32"], "shapes": [[8]],
                          "inputs": ["normal"], "layouts": ["contiguous"], "device": "emu0"},
                         scope="submit")
        small = s.wait_jobs([body["job"]["id"]], timeout=120)
        check(list(small.values())[0]["state"] == "passed",
              "the worker stopped the cancelled job and ran the next one")
        check(s.job(long_id)["state"] == "cancelled", "the cancelled job stays cancelled")
        m = re.search(r"job %s: cancelled after (\d+) of (\d+) cases" % long_id, s.tail(100000))
        check(m is not None and int(m.group(1)) < int(m.group(2)) == N_CASES,
              "the worker stopped it early (%s)" % (m.group(0) if m else "no log line"))


if __name__ == "__main__":
    main(test)
