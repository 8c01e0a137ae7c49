#!/usr/bin/env python3
"""The queue depth counts committed jobs only. Submissions whose group commit
fails (here: the daemon's file-size limit lowered to 1 byte with prlimit, so
SQLite's WAL writes fail with EFBIG, SIGXFSZ ignored, as a full disk would
fail them) are answered 503 and must not stay in numvald_queue_depth, nor make
the queue_depth limit refuse later submissions with 429."""
import os
import resource
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvdaemon import Daemon, check, main  # noqa: E402

LIMIT = 5


def ignore_xfsz():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def metric(d, name):
    st, b, _ = d.request("GET", "/metrics", scope="read")
    text = b.decode() if isinstance(b, bytes) else str(b)
    for line in text.splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    raise AssertionError("no metric %s in /metrics" % name)


def queued(d):
    st, b, _ = d.request("GET", "/api/v1/jobs?state=queued&limit=1000", scope="read")
    return len(b["jobs"])


def submit(d, i):
    spec = {"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[4]], "seed": i}
    st, b, _ = d.request("POST", "/api/v1/jobs", body=spec, scope="submit")
    return st, b


def test(numvald):
    with Daemon(numvald, limits={"queue_depth": LIMIT}) as d:
        d.start(preexec_fn=ignore_xfsz)
        d.token("read")
        d.token("submit")
        for i in range(2):
            st, _ = submit(d, i)
            check(st == 201, "submit %d before the failure: %s" % (i, st))
        check(metric(d, "numvald_queue_depth") == 2, "queue depth 2 before the failure")
        soft, hard = resource.prlimit(d.proc.pid, resource.RLIMIT_FSIZE)
        resource.prlimit(d.proc.pid, resource.RLIMIT_FSIZE, (1, hard))
        try:
            codes = [submit(d, 100 + i)[0] for i in range(6)]
        finally:
            resource.prlimit(d.proc.pid, resource.RLIMIT_FSIZE, (soft, hard))
        check(all(c == 503 for c in codes),
              "submissions while commits fail are answered 503 (%s)" % codes)
        check(metric(d, "numvald_commit_failures_total") >= 1, "the commit failures are counted")
        n = queued(d)
        check(n == 2, "the store holds the 2 committed jobs only (%d)" % n)
        depth = metric(d, "numvald_queue_depth")
        check(depth == n, "numvald_queue_depth %d equals the queued jobs %d" % (depth, n))
        for i in range(LIMIT - 2):
            st, b = submit(d, 200 + i)
            check(st == 201, "submit %d after the failure is accepted: %s %s" % (i, st, "" if st == 201 else b))
        st, b = submit(d, 300)
        check(st == 429 and "holds %d jobs" % LIMIT in b["error"]["message"],
              "the %d+1st queued job is refused, naming %d: %s %s" % (LIMIT, LIMIT, st, b))
        check(metric(d, "numvald_queue_depth") == LIMIT == queued(d), "depth and store agree")
        rc, reports = d.stop()
        check(rc == 0 and not reports, "numvald exits 0 on SIGTERM (%s %s)" % (rc, reports[:2]))


if __name__ == "__main__":
    main(test)
