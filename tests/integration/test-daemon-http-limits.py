#!/usr/bin/env python3
"""The HTTP layer's limits against a real numvald, before and without a token:

- an upload without a token is refused at the end of its headers, so 20
  connections holding one body byte of a 25.6 MiB artifact PUT each do not take
  the body budget from submits, heartbeats and claims (they took 512 MiB and
  every write got 503);
- a body is charged as its bytes arrive (20 worker connections holding one byte
  of such a PUT each hold 64 KiB, not 25.6 MiB) and to its scope's budget
  (client bodies filling their share leave workers theirs);
- smaller refusals: a zstd frame declaring 2^60 bytes, Transfer-Encoding
  'gzip, chunked', query values with %00, a URI over the limit (414, not
  431), a chunk size over the limit (413 at once, not 408 after the body
  timeout), POST /healthz (405 with Allow), a header name with a space, a
  non-loopback listener with anonymous reads (a warning), a read-only data dir
  (a message that says so)."""
import hashlib
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvdaemon import Daemon, check, main, raw_status_json  # noqa: E402

GOOD = {"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[8]], "inputs": ["normal"],
        "seed": 3}
# 20 x this fills all but 12 bytes of the default max_body_total (512 MiB) when
# the whole declared length is reserved at the first body byte (the old rule).
DECLARED = 26843545


def hold(d, n, path, declared, token=None):
    """n connections that sent the headers of a PUT declaring `declared` bytes
    and one body byte, and then nothing."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
        hdr = "PUT %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n" % (path, declared)
        if token:
            hdr += "Authorization: Bearer %s\r\n" % token
        s.sendall(hdr.encode() + b"\r\n" + b"\x28")
        socks.append(s)
    return socks


def answer_of(s, timeout=5):
    """The response a held connection got within timeout (b"" if none)."""
    s.settimeout(timeout)
    out = b""
    try:
        while b"}}" not in out:
            d = s.recv(65536)
            if not d:
                break
            out += d
    except (socket.timeout, ConnectionResetError):
        pass
    return out


def in_two(d, path, body, scope):
    """POST body with its first byte sent with the headers and the rest 0.1 s
    later, as a body arrives over a real network: the old rule reserved the
    rest of the declared length at that first byte. (status, JSON)."""
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
    try:
        s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\nAuthorization: Bearer %s\r\nConnection: close\r\n"
                   "\r\n" % (path, len(data), d.token(scope))).encode() + data[:1])
        time.sleep(0.1)
        try:
            s.sendall(data[1:])
        except OSError:
            pass  # refused already: its answer is read below
        return raw_status_json(answer_of(s, timeout=10))
    finally:
        s.close()


def writes_still_served(d, what):
    st, body = in_two(d, "/api/v1/jobs", GOOD, "submit")
    check(st == 201, "%s: a submit is stored (got %s %s)" % (what, st, str(body)[:160]))
    st, body = in_two(d, "/api/v1/worker/heartbeat", {"job_id": 987654, "lease_token": "x"},
                      "worker")
    check(st == 404, "%s: a heartbeat is answered, 404 for a missing job (got %s %s)" %
          (what, st, str(body)[:160]))
    st, body = in_two(d, "/api/v1/worker/claim", {"device": "nodev", "wait_ms": 0}, "worker")
    check(st in (200, 204), "%s: a claim is answered, 200 or 204 (got %s %s)" %
          (what, st, str(body)[:160]))


def blackout(d):
    sha = "ab" * 32
    path = "/api/v1/worker/artifacts/" + sha
    socks = hold(d, 20, path, DECLARED)
    try:
        time.sleep(0.3)  # let the daemon read every held byte before the writes below
        writes_still_served(d, "with 20 unauthenticated uploads held")
        answers = [raw_status_json(answer_of(s))[0] for s in socks]
        check(answers == [401] * 20,
              "20 artifact PUTs without a token, one body byte each: 401 at once, before the "
              "body (got %s)" % answers)
    finally:
        for s in socks:
            s.close()
    # The same with a worker token: charged as bytes arrive, 20 x 64 KiB.
    socks = hold(d, 20, path, DECLARED, token=d.token("worker"))
    try:
        time.sleep(0.3)  # let the daemon read every held byte before the writes below
        writes_still_served(d, "with 20 worker uploads holding one byte each")
    finally:
        for s in socks:
            s.close()


def client_cannot_starve_workers(numvald):
    """max_body_total 32 MiB: client bodies may hold 6/16 (12 MiB), workers 9/16."""
    limits = {"max_body_total": 32 << 20, "max_artifact_body": 16 << 20,
              "max_job_body": 1 << 20}
    with Daemon(numvald, limits=limits) as d:
        d.start()
        tok = d.token("submit")
        socks = []
        try:
            for _ in range(40):
                s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
                s.sendall(("POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                           "Authorization: Bearer %s\r\n\r\n" % (1 << 20, tok)).encode())
                try:
                    s.sendall(b" " * ((1 << 20) - 1))
                except OSError:
                    pass  # refused and closed: counted below
                socks.append(s)
            time.sleep(0.3)  # the daemon reads what was sent
            codes = [raw_status_json(answer_of(s, timeout=0.2))[0] for s in socks]
            refused = codes.count(503)
            # A body is charged as its buffer grows (64 KiB doubling, capped at the
            # declared length + 1); with its last byte unsent a held body's buffer
            # stops at exactly 1 MiB, so at most 12 fit in the 12 MiB share. When
            # the daemon reads each body to the end before the next arrives (a
            # loaded machine), exactly 12 are held; when it reads them interleaved,
            # the refused ones keep their partial charge until they close, so more
            # are refused.
            check(refused >= 28 and set(codes) <= {503, None},
                  "40 client bodies of 1 MiB held: at least the 28 past the client share "
                  "(12 MiB) get 503 (%d did: %s)" % (refused, sorted(set(codes), key=str)))
            st, body = in_two(d, "/api/v1/worker/heartbeat",
                              {"job_id": 987654, "lease_token": "x"}, "worker")
            check(st == 404, "with the client share full, a worker heartbeat is answered "
                  "(404 for a missing job; got %s %s)" % (st, str(body)[:160]))
        finally:
            for s in socks:
                s.close()
        rc, reports = d.stop()
        check(rc == 0 and not reports, "budget daemon: clean exit, no sanitizer report (%s %s)" %
              (rc, reports[:3]))


def zstd_bomb(d):
    # A frame header with the single-segment flag and an 8-byte content size
    # of 2^60 (RFC 8878 §3.1.1.1), then one empty raw block marked last.
    frame = struct.pack("<IBQ", 0xFD2FB528, 0xE0, 1 << 60) + b"\x01\x00\x00"
    sha = hashlib.sha256(frame).hexdigest()
    st, body, _ = d.request("PUT", "/api/v1/worker/artifacts/" + sha, raw=frame,
                            scope="worker", headers={"Content-Type": "application/zstd"})
    check(st == 413 and body["error"]["code"] == "too_large" and
          "1152921504606846976" in body["error"]["message"],
          "an empty zstd frame declaring 2^60 bytes: 413 naming the size (got %s %s)" %
          (st, str(body)[:200]))
    st, _, _ = d.request("GET", "/api/v1/artifacts/" + sha)
    check(st == 404, "and nothing is stored (got %s)" % st)


def small(d):
    tok = d.token("submit")
    before = d.request("GET", "/api/v1/jobs?limit=1000")[1]["jobs"]
    spec = b'{"kind":"op","op":"exp","dtypes":["fp32"],"shapes":[[8]],"seed":4}'
    req = ("POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
           "Content-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" % tok)
    st, body = raw_status_json(d.raw(req.encode() + b"%x\r\n" % len(spec) + spec +
                                     b"\r\n0\r\n\r\n"))
    check(st == 501 and "gzip, chunked" in body["error"]["message"],
          "Transfer-Encoding 'gzip, chunked': 501 naming it (got %s %s)" % (st, body))
    after = d.request("GET", "/api/v1/jobs?limit=1000")[1]["jobs"]
    check(len(after) == len(before), "and no job is stored (%d -> %d)" %
          (len(before), len(after)))
    for q, field in (("limit=10%00", "limit"), ("state=%00", "state"), ("kind=op%0a", "kind"),
                     ("limit=%zz", "limit")):
        st, body, _ = d.request("GET", "/api/v1/jobs?" + q)
        check(st == 400 and body["error"].get("field") == field and
              field in body["error"]["message"],
              "?%s: 400 naming '%s' (got %s %s)" % (q, field, st, str(body)[:160]))
    st, body = raw_status_json(d.raw(b"GET /api/v1/jobs?x=" + b"a" * 20000 +
                                     b" HTTP/1.1\r\nHost: x\r\n\r\n"))
    check(st == 414, "a 20 KB URI over max_header_bytes (16384): 414 (got %s)" % st)
    st, body = raw_status_json(d.raw(b"GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\nX-Pad: " +
                                     b"a" * 20000 + b"\r\n\r\n"))
    check(st == 431, "a 20 KB header: still 431 (got %s)" % st)
    req = ("POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
           "Transfer-Encoding: chunked\r\n\r\nfffffff\r\n{" % tok)
    t0 = time.time()
    st, body = raw_status_json(d.raw(req.encode(), timeout=10))
    check(st == 413 and body["error"]["code"] == "too_large",
          "a chunk of 0xfffffff bytes over the 1 MiB limit: 413 without waiting for it "
          "(got %s after %.1f s)" % (st, time.time() - t0))
    st, body, r = d.request("POST", "/healthz", raw=b"{}")
    check(st == 405 and r.getheader("Allow") == "GET, HEAD",
          "POST /healthz: 405 with Allow: GET, HEAD (got %s %s)" % (st, r.getheader("Allow")))
    st, body, r = d.request("DELETE", "/api/v1/jobs", scope="admin")
    check(st == 405 and r.getheader("Allow") == "GET, HEAD, POST",
          "DELETE /api/v1/jobs: 405 with Allow: GET, HEAD, POST (got %s %s)" %
          (st, r.getheader("Allow")))
    st, body = raw_status_json(d.raw(b"GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\n"
                                     b"Bad Name: 1\r\n\r\n"))
    check(st == 400 and "Bad Name" in body["error"]["message"],
          "a header named 'Bad Name': 400 naming it (got %s %s)" % (st, body))
    st, body, _ = d.request("POST", "/api/v1/nothing", raw=b"x" * 10000)
    check(st == 413, "an unauthenticated 10 KB body to an unknown route: 413 (got %s)" % st)


def wildcard_warning(numvald):
    with Daemon(numvald, server={"listen": "0.0.0.0:0", "anonymous_read": "yes"}) as d:
        d.start()
        deadline = time.time() + 5
        while "0.0.0.0" not in d.tail() and time.time() < deadline:
            time.sleep(0.05)
        log = d.tail()
        warn = [l for l in log.splitlines() if "not a loopback address" in l]
        check(warn and "'0.0.0.0:0'" in warn[0] and "anonymous_read = yes" in warn[0] and
              "without a token are allowed from any host" in warn[0],
              "listen 0.0.0.0 with anonymous_read = yes: a warning naming both (%s)" %
              (warn[0] if warn else log[-300:]))
    with Daemon(numvald) as d:
        d.start()
        check("not a loopback address" not in d.tail(), "no such warning on 127.0.0.1")


def budget_config(numvald):
    with Daemon(numvald, limits={"max_body_total": 64 << 20}) as d:
        p = subprocess.run([numvald, "--config", d.conf, "--check-config"],
                           capture_output=True, text=True, timeout=30)
        check(p.returncode != 0 and "max_body_total" in p.stderr and
              "max_artifact_body" in p.stderr,
              "max_body_total 64 MiB leaves workers less than a 64 MiB artifact: refused "
              "naming both (rc %s: %s)" % (p.returncode, p.stderr.strip()[:200]))


def read_only_data_dir(numvald):
    tmp = tempfile.mkdtemp(prefix="numvald-ro-")
    try:
        data = os.path.join(tmp, "data")
        os.mkdir(data)
        os.chmod(tmp, 0o755)
        os.chmod(data, 0o555)
        pre = None
        if os.geteuid() == 0:
            # root writes anywhere: run as nobody, for whom the mode holds
            def pre():
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
        p = subprocess.run([numvald, "--data-dir", data, "--listen", "127.0.0.1:0"],
                           capture_output=True, text=True, timeout=30, preexec_fn=pre)
        check(p.returncode != 0 and "read-only" in p.stderr and data in p.stderr,
              "a read-only data dir: numvald exits and says it is read-only (rc %s: %s)" %
              (p.returncode, p.stderr.strip()[:300]))
    finally:
        os.chmod(os.path.join(tmp, "data"), 0o755)
        subprocess.run(["rm", "-rf", tmp])


def test(numvald):
    with Daemon(numvald) as d:
        d.start()
        for s in ("submit", "worker", "admin"):
            d.token(s)
        blackout(d)
        zstd_bomb(d)
        small(d)
        check(d.alive() and d.request("GET", "/healthz")[0] == 200, "numvald still serves")
        rc, reports = d.stop()
        check(rc == 0 and not reports, "clean exit, no sanitizer report (%s %s)" %
              (rc, reports[:3]))
    client_cannot_starve_workers(numvald)
    wildcard_warning(numvald)
    budget_config(numvald)
    read_only_data_dir(numvald)


if __name__ == "__main__":
    main(test)
