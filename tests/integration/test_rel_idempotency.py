#!/usr/bin/env python3
"""Idempotent submission: POST /api/v1/jobs with an Idempotency-Key returns
the original job (200, "replayed") for the same key and body, refuses the key
with another body (422) and a malformed key (400), keeps keys per token, and
stores no key for a submission whose commit failed (its retry creates the job).
numvalctl submit sends a key and retries: through a proxy that swallows the
first 201 (the lost answer a CI client retries after) one job is created, not
two; against a daemon whose commits fail (RLIMIT_FSIZE, as in
test_rel_queue_depth.py) it retries the 503s until the job is stored."""
import os
import resource
import signal
import socket
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvdaemon import Daemon, check, main  # noqa: E402

SPEC = {"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[4]], "seed": 1}


def ignore_xfsz():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def read_http(sock):
    """One HTTP/1.1 message (head + Content-Length body) from sock, or b''."""
    data = b""
    while b"\r\n\r\n" not in data:
        d = sock.recv(65536)
        if not d:
            return data
        data += d
    head, _, body = data.partition(b"\r\n\r\n")
    n = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v.strip())
    while len(body) < n:
        d = sock.recv(65536)
        if not d:
            break
        body += d
    return head + b"\r\n\r\n" + body


class LosingProxy:
    """Forwards to numvald; drops the answer to the first POST /api/v1/jobs
    after numvald has sent it (the job is stored, the client never hears)."""

    def __init__(self, port):
        self.port = port
        self.lost = 0
        self.posts = 0
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.addr = self.srv.getsockname()[1]
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            with c:
                req = read_http(c)
                if not req:
                    continue
                # One request per connection: numvalctl opens a new one per request.
                req = req.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)
                with socket.create_connection(("127.0.0.1", self.port)) as u:
                    u.sendall(req)
                    resp = read_http(u)
                if req.startswith(b"POST /api/v1/jobs "):
                    self.posts += 1
                    if self.lost == 0:
                        self.lost += 1
                        continue  # close without answering
                c.sendall(resp)

    def close(self):
        self.srv.close()


def post(d, body, key=None, scope="submit"):
    h = {"Idempotency-Key": key} if key is not None else {}
    return d.request("POST", "/api/v1/jobs", body=body, scope=scope, headers=h)[:2]


def n_jobs(d):
    st, b, _ = d.request("GET", "/api/v1/jobs?limit=1000", scope="read")
    return len(b["jobs"])


def api(d):
    st, a = post(d, SPEC, "k-1")
    check(st == 201, "first submission with a key: 201 (%s)" % st)
    st, b = post(d, SPEC, "k-1")
    check(st == 200 and b["job"]["id"] == a["job"]["id"] and b.get("replayed") is True,
          "same key, same body: 200 with the original job %s, replayed" % a["job"]["id"])
    st, b = post(d, SPEC, '"k-1"')
    check(st == 200 and b["job"]["id"] == a["job"]["id"],
          "the quoted (structured-field) form is the same key")
    st, b = post(d, dict(SPEC, seed=2), "k-1")
    check(st == 422 and b["error"]["code"] == "idempotency_key_reused" and
          str(a["job"]["id"]) in b["error"]["message"],
          "same key, another body: 422 naming the job: %s" % b["error"]["message"])
    for bad in ["", "x" * 256, "a b"]:
        st, b = post(d, SPEC, bad)
        check(st == 400 and b["error"].get("field") == "Idempotency-Key",
              "key %r refused with 400 naming the header" % bad[:12])
    st, b = post(d, SPEC, "k-1", scope="admin")
    check(st == 201 and b["job"]["id"] != a["job"]["id"],
          "another token's key 'k-1' is its own")
    before = n_jobs(d)
    post(d, SPEC)
    post(d, SPEC)
    check(n_jobs(d) == before + 2, "without a key each submission is a new job")


def failed_commit(d):
    soft, hard = resource.prlimit(d.proc.pid, resource.RLIMIT_FSIZE)
    resource.prlimit(d.proc.pid, resource.RLIMIT_FSIZE, (1, hard))
    try:
        st, _ = post(d, dict(SPEC, seed=3), "k-fail")
    finally:
        resource.prlimit(d.proc.pid, resource.RLIMIT_FSIZE, (soft, hard))
    check(st == 503, "a submission whose commit fails: 503 (%s)" % st)
    st, b = post(d, dict(SPEC, seed=3), "k-fail")
    check(st == 201, "its retry with the same key creates the job (no key was kept): %s" % st)


def ctl(numvalctl, url, token, tmp, *args):
    path = os.path.join(tmp, "job.json")
    with open(path, "w") as f:
        import json
        json.dump(dict(SPEC, seed=10), f)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMVAL_")}
    return subprocess.run([numvalctl, "--server", url, "--token", token, "submit", path] +
                          list(args), capture_output=True, text=True, timeout=120, env=env)


def client(d, numvalctl):
    proxy = LosingProxy(d.port)
    try:
        before = n_jobs(d)
        p = ctl(numvalctl, "http://127.0.0.1:%d" % proxy.addr, d.token("submit"), d.tmp)
    finally:
        proxy.close()
    check(proxy.lost == 1 and proxy.posts == 2, "the proxy lost the first answer (%d posts)"
          % proxy.posts)
    check(p.returncode == 0 and "retrying" in p.stderr,
          "numvalctl submit retried and succeeded (%s): %s" % (p.returncode, p.stderr.strip()))
    check(n_jobs(d) == before + 1, "one job created, not two (%d new)" % (n_jobs(d) - before))
    ids = p.stdout.split()
    st, b, _ = d.request("GET", "/api/v1/jobs?limit=1", scope="read")
    check(ids == [str(b["jobs"][0]["id"])], "it printed the id of that job (%s)" % ids)

    # 5xx: numvald's commits fail until the limit is lifted, after the first 503.
    before = n_jobs(d)
    soft, hard = resource.prlimit(d.proc.pid, resource.RLIMIT_FSIZE)
    resource.prlimit(d.proc.pid, resource.RLIMIT_FSIZE, (1, hard))
    proc = None
    try:
        url = "http://127.0.0.1:%d" % d.port
        path = os.path.join(d.tmp, "job.json")
        proc = subprocess.Popen([numvalctl, "--server", url, "--token", d.token("submit"),
                                 "submit", path], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        line = proc.stderr.readline()
    finally:
        resource.prlimit(d.proc.pid, resource.RLIMIT_FSIZE, (soft, hard))
    out, err = proc.communicate(timeout=120)
    check("HTTP 503; retrying" in line, "numvalctl retried a 503: %s" % line.strip())
    check(proc.returncode == 0 and n_jobs(d) == before + 1,
          "and stored the job once the commits work (%s, %d new)" %
          (proc.returncode, n_jobs(d) - before))
    p = ctl(numvalctl, "http://127.0.0.1:%d" % d.port, d.token("submit"), d.tmp, "--retries",
            "x")
    check(p.returncode == 2 and "--retries 'x'" in p.stderr, "a bad --retries is refused")


def test(numvald):
    numvalctl = sys.argv[3]
    with Daemon(numvald) as d:
        d.start(preexec_fn=ignore_xfsz)
        for s in ("read", "submit", "admin"):
            d.token(s)
        api(d)
        failed_commit(d)
        client(d, numvalctl)
        rc, reports = d.stop()
        check(rc == 0 and not reports, "numvald exits 0 on SIGTERM (%s %s)" % (rc, reports[:2]))


if __name__ == "__main__":
    main(test)
