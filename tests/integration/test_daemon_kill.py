#!/usr/bin/env python3
"""kill -9 numvald with 200 jobs queued or running; after a restart on the same
data directory every job completes, none is lost, and no case is stored twice.
The workers keep running across the restart (they retry with backoff), and so
does a `numvalctl submit --wait` that CI would be blocked in."""
import json
import os
import signal
import time
import xml.etree.ElementTree as ET

from nvservice import Service, check, main

N = 200


def spec(i):
    # Two small cases per job, each job with its own seed.
    return {"kind": "op", "op": "add", "dtypes": ["fp32"], "shapes": [[33]],
            "layouts": ["contiguous"], "inputs": ["normal", "uniform"], "seed": 1000 + i,
            "device": "emu0"}


def test(bins):
    with Service(bins, lease_ms=2000, max_attempts=10) as s:
        s.start_daemon()
        ids = []
        for i in range(N - 1):
            st, body = s.api("POST", "/api/v1/jobs", spec(i), scope="submit")
            if st != 201:
                check(False, "job %d accepted (%s %s)" % (i, st, body))
            ids.append(body["job"]["id"])
        # The last job goes through numvalctl, which then waits across the restart.
        with open(os.path.join(s.tmp, "last.json"), "w") as f:
            json.dump(spec(N - 1), f)
        ctl = s.ctl_popen("submit", "last.json", "--wait", "--junit", "last.xml",
                          "--timeout", "600")
        deadline = time.time() + 60
        while time.time() < deadline:
            st, body = s.api("GET", "/api/v1/jobs?limit=500", scope="read")
            if st == 200 and len(body["jobs"]) == N:
                ids.append(max((j["id"] for j in body["jobs"]), key=int))
                break
            time.sleep(0.1)
        check(len(set(ids)) == N, "%d jobs accepted with distinct ids" % N)
        s.start_worker("emu0", "emu")
        s.start_worker("emu0", "emu")
        # Let some finish so the kill hits a mix of done, running and queued jobs.
        deadline = time.time() + 120
        while time.time() < deadline:
            st, body = s.api("GET", "/api/v1/jobs?state=passed&limit=20", scope="read")
            if st == 200 and len(body["jobs"]) >= 5:
                break
            time.sleep(0.2)
        unfinished = 0
        for state in ("queued", "leased", "running"):
            st, body = s.api("GET", "/api/v1/jobs?state=%s&limit=500" % state, scope="read")
            unfinished += len(body["jobs"]) if st == 200 else 0
        s.kill_daemon(signal.SIGKILL)
        check(unfinished > 0, "numvald killed with SIGKILL with %d of %d jobs unfinished" %
              (unfinished, N))
        time.sleep(0.5)
        s.start_daemon()
        jobs = s.wait_jobs(ids, timeout=500, tolerate_down=True)
        states = {}
        for j in jobs.values():
            states[j["state"]] = states.get(j["state"], 0) + 1
        check(states.get("passed") == N, "all %d jobs passed after the restart (%s)" %
              (N, states))
        bad = []
        for jid in ids:
            cases = s.cases(jid)
            idx = [c["index"] for c in cases]
            if len(cases) != 2 or sorted(idx) != [0, 1] or jobs[jid]["cases_total"] != 2:
                bad.append((jid, idx, jobs[jid]["cases_total"]))
        check(not bad, "every job has exactly its 2 cases, none duplicated (bad: %s)" % bad[:5])
        rc = ctl.wait(timeout=120)
        check(rc == 0, "numvalctl submit --wait survived the restart and exits 0 (%d)" % rc)
        root = ET.parse(os.path.join(s.tmp, "last.xml")).getroot()
        check(root.get("tests") == "2" and root.get("failures") == "0",
              "its JUnit XML has the job's 2 passed cases")


if __name__ == "__main__":
    main(test)
