#!/usr/bin/env python3
"""A damaged database is detected. numvald refuses to start on a database
with an interior page zeroed (PRAGMA quick_check at start) and on an empty or
missing database where one was created (the numvald.db.created marker), each
with a message naming the file and what to do; `numvald check-db` reports
the damage (exit 1) and a sound database (exit 0). Damage met while running
(the jobs table's root page zeroed under a live numvald) makes it read-only:
/healthz answers 503 "degraded", numvald_store_damaged is 1, a submission is
refused with 503 store_damaged."""
import os
import shutil
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvdaemon import Daemon, Fail, check, main  # noqa: E402

N = 300


def fill(d):
    for i in range(N):
        spec = {"kind": "op", "op": "exp", "dtypes": ["fp32"], "seed": i,
                "shapes": [[k] for k in range(1, 60)]}
        st, b, _ = d.request("POST", "/api/v1/jobs", body=spec, scope="submit")
        if st != 201:
            check(False, "submit %d: %s %s" % (i, st, b))


def jobs_root(db):
    """(page size, root page of the jobs table); the table spans many pages, so
    its root is an interior b-tree page."""
    c = sqlite3.connect("file:%s?immutable=1" % db, uri=True)
    try:
        ps = c.execute("PRAGMA page_size").fetchone()[0]
        root = c.execute("SELECT rootpage FROM sqlite_master WHERE name = 'jobs'").fetchone()[0]
        pages = c.execute("PRAGMA page_count").fetchone()[0]
    finally:
        c.close()
    check(pages > 20, "the database has %d pages" % pages)
    return ps, root


def zero_page(db, ps, page):
    with open(db, "r+b") as f:
        f.seek((page - 1) * ps)
        f.write(b"\0" * ps)


def check_db(d):
    return subprocess.run([d.bin, "--config", d.conf, "check-db"], capture_output=True,
                          text=True, timeout=60)


def start_fails(d, what):
    try:
        d.start()
    except Fail as e:
        return str(e)
    st, b, _ = d.request("GET", "/healthz")
    d.kill()
    check(False, "numvald refused to start on %s (it started; /healthz %s %s)" % (what, st, b))


def metric(d, name):
    st, b, _ = d.request("GET", "/metrics", scope="read")
    for line in b.decode().splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    return None


def at_start(numvald):
    with Daemon(numvald) as d:
        d.start()
        fill(d)
        d.token("read")  # in the backup below
        rc, reports = d.stop()
        check(rc == 0 and not reports, "numvald stored %d jobs and stopped" % N)
        db = os.path.join(d.data, "numvald.db")
        p = check_db(d)
        check(p.returncode == 0 and "integrity_check ok" in p.stdout,
              "check-db on the sound database: ok (%s)" % p.stdout.strip())
        good = os.path.join(d.tmp, "good.db")
        shutil.copy(db, good)
        ps, root = jobs_root(db)
        zero_page(db, ps, root)
        msg = start_fails(d, "a database with page %d zeroed" % root)
        check("is damaged (PRAGMA quick_check" in msg and db in msg and "restore" in msg,
              "refused with a message naming the damage: %s" % msg[msg.find("database '"):][:500])
        p = check_db(d)
        check(p.returncode == 1 and "damaged" in p.stderr,
              "check-db reports the damage: %s" % p.stderr.strip()[:200])

        # integrity_check = off starts on it; the damage then shows at the first read.
        with open(d.conf) as f:
            conf = f.read()
        with open(d.conf, "w") as f:
            f.write(conf.replace("[server]\n", "[server]\nintegrity_check = off\n", 1))
        d.start()
        st, b, _ = d.request("GET", "/api/v1/jobs?limit=1000", scope="read")
        check(st == 503 and b["error"]["code"] == "store_damaged",
              "integrity_check = off: numvald starts, the read is 503 store_damaged (%s)" % st)
        st, b, _ = d.request("GET", "/healthz")
        check(st == 503 and b["status"] == "degraded", "and /healthz says degraded")
        d.kill()
        with open(d.conf, "w") as f:
            f.write(conf)
        check(os.path.exists(db + ".created"), "the marker numvald.db.created was written")
        for f in os.listdir(d.data):
            if f.startswith("numvald.db-"):
                os.unlink(os.path.join(d.data, f))
        open(db, "w").close()
        msg = start_fails(d, "a zero-length database")
        check("empty (0 bytes)" in msg and "numvald.db.created" in msg,
              "an empty database is refused: %s" % msg[-300:])
        os.unlink(db)
        msg = start_fails(d, "a missing database")
        check("is missing" in msg, "a missing database is refused: %s" % msg[-200:])
        shutil.copy(good, db)
        d.start()
        st, b, _ = d.request("GET", "/api/v1/jobs?limit=1000", scope="read")
        check(st == 200 and len(b["jobs"]) == N, "the restored backup serves its %d jobs (%s %s)"
              % (N, st, b if st != 200 else ""))
        d.stop()
        os.unlink(db)
        os.unlink(db + ".created")
        d.start()
        st, b, _ = d.request("GET", "/healthz")
        check(st == 200 and b["status"] == "ok",
              "without the marker a missing database starts afresh (the documented way out)")


def at_run(numvald):
    with Daemon(numvald) as d:
        d.start()
        fill(d)
        st, b, _ = d.request("GET", "/healthz")
        check(st == 200 and b["status"] == "ok", "healthy before the damage")
        check(metric(d, "numvald_store_damaged") == 0, "numvald_store_damaged 0 before")
        db = os.path.join(d.data, "numvald.db")
        # Another connection writes and checkpoints: numvald's page caches are
        # dropped at their next read, which then reads the zeroed page from disk.
        c = sqlite3.connect(db, timeout=10)
        c.execute("UPDATE jobs SET priority = priority WHERE id = 1")
        c.commit()
        busy, _, _ = c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        ps = c.execute("PRAGMA page_size").fetchone()[0]
        root = c.execute("SELECT rootpage FROM sqlite_master WHERE name = 'jobs'").fetchone()[0]
        c.close()
        check(busy == 0, "the WAL was checkpointed into the database file")
        zero_page(db, ps, root)
        st, b, _ = d.request("GET", "/api/v1/jobs?limit=1000", scope="read")
        check(st == 503 and b["error"]["code"] == "store_damaged",
              "a read of the damaged table: 503 store_damaged (%s %s)" % (st, b))
        st, b, _ = d.request("GET", "/healthz")
        check(st == 503 and b["status"] == "degraded" and b["store"]["state"] == "damaged",
              "/healthz: 503 degraded, naming the damage: %s" % b.get("store"))
        check(metric(d, "numvald_store_damaged") == 1, "numvald_store_damaged 1")
        st, b, _ = d.request("POST", "/api/v1/jobs", scope="submit",
                             body={"kind": "op", "op": "exp", "dtypes": ["fp32"],
                                   "shapes": [[4]]})
        check(st == 503 and b["error"]["code"] == "store_damaged",
              "a submission is refused: %s" % b["error"]["message"][:160])
        d.kill()


def test(numvald):
    at_start(numvald)
    at_run(numvald)


if __name__ == "__main__":
    main(test)
