#!/usr/bin/env python3
"""A corpus of bad requests against a real numvald: each gets its 4xx JSON
error, and afterwards the daemon still serves and the jobs stored before are
intact."""
import hashlib
import http.client
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvdaemon import Daemon, check, main, raw_status_json  # noqa: E402

GOOD = {"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[8]], "inputs": ["normal"],
        "seed": 3}


def is_error(body, code, field=None):
    if not isinstance(body, dict) or not isinstance(body.get("error"), dict):
        return False
    e = body["error"]
    if e.get("code") != code or not isinstance(e.get("message"), str) or not e["message"]:
        return False
    return field is None or e.get("field") == field


def expect(d, what, status, code, got, field=None):
    st, body = got[0], got[1]
    check(st == status and is_error(body, code, field),
          "%s -> %d %s%s (got %s %s)" % (what, status, code,
                                          " field %s" % field if field is not None else "",
                                          st, str(body)[:200]))


def corpus(d):
    sub = "submit"
    expect(d, "malformed JSON", 400, "bad_request",
           d.request("POST", "/api/v1/jobs", raw=b'{"kind": "op", ', scope=sub), field="")
    expect(d, "JSON array instead of an object", 400, "bad_request",
           d.request("POST", "/api/v1/jobs", body=[1, 2], scope=sub), field="")
    bad = dict(GOOD, dtypes="fp32")
    expect(d, "dtypes as a string", 400, "bad_request",
           d.request("POST", "/api/v1/jobs", body=bad, scope=sub), field="/dtypes")
    expect(d, "priority as a string", 400, "bad_request",
           d.request("POST", "/api/v1/jobs", body=dict(GOOD, priority="high"), scope=sub),
           field="/priority")
    expect(d, "unknown op", 400, "bad_request",
           d.request("POST", "/api/v1/jobs", body=dict(GOOD, op="frobnicate"), scope=sub),
           field="/op")
    expect(d, "unknown dtype", 400, "bad_request",
           d.request("POST", "/api/v1/jobs", body=dict(GOOD, dtypes=["fp31"]), scope=sub),
           field="/dtypes/0")
    huge = json.dumps(dict(GOOD, description="x" * (2 << 20))).encode()
    expect(d, "2 MiB job spec over the 1 MiB limit", 413, "too_large",
           d.request("POST", "/api/v1/jobs", raw=huge, scope=sub))
    resp = d.raw(b"GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 40000 +
                 b"\r\n\r\n")
    st, body = raw_status_json(resp)
    check(st == 431 and is_error(body, "too_large"), "40 KB header -> 431 too_large (%s)" % st)
    # Slow client: the header deadline is 1 s; one byte every 0.15 s never finishes.
    resp = d.raw(b"GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"z" * 40, timeout=5,
                 drip=0.15)
    st, body = raw_status_json(resp)
    check(st == 408 and is_error(body, "timeout"), "slowloris client -> 408 timeout (%s)" % st)
    expect(d, "bad token", 401, "unauthorized",
           d.request("POST", "/api/v1/jobs", body=GOOD,
                     headers={"Authorization": "Bearer nvt_" + "0" * 64}))
    expect(d, "no token on a write", 401, "unauthorized",
           d.request("POST", "/api/v1/jobs", body=GOOD))
    expect(d, "worker token submitting (missing scope)", 403, "forbidden",
           d.request("POST", "/api/v1/jobs", body=GOOD, scope="worker"))
    expect(d, "submit token changing a tolerance (missing scope)", 403, "forbidden",
           d.request("POST", "/api/v1/tolerances", body={}, scope="submit"))
    expect(d, "submit token claiming (missing scope)", 403, "forbidden",
           d.request("POST", "/api/v1/worker/claim", body={"device": "d"}, scope="submit"))
    for path in (b"/../../../etc/passwd", b"/js/../../../etc/passwd",
                 b"/js/%2e%2e/%2e%2e/%2e%2e/etc/passwd", b"/%2e%2e/numvald.ini",
                 b"/a/./index.html", b"//etc/passwd"):
        st, body = raw_status_json(d.raw(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n"
                                         b"Connection: close\r\n\r\n"))
        check(st == 400 and is_error(body, "bad_request"),
              "static traversal %s -> 400 (%s)" % (path.decode(), st))
    for path in ("/api/v1/artifacts/..%2f..%2fetc%2fpasswd", "/api/v1/artifacts/" + "A" * 64):
        expect(d, "artifact id %s" % path[18:40], 400, "bad_request",
               d.request("GET", path))
    expect(d, "artifact upload to a traversal id", 400, "bad_request",
           d.request("PUT", "/api/v1/worker/artifacts/..%2f..%2fx", raw=b"abc", scope="worker"))
    expect(d, "artifact upload whose hash does not match", 400, "bad_request",
           d.request("PUT", "/api/v1/worker/artifacts/" + "0" * 64, raw=b"abc", scope="worker"))
    st, body = raw_status_json(d.raw(b"GET /x HTTP/9.9 garbage\r\n\r\n"))
    check(st == 400 and is_error(body, "bad_request"), "malformed request line -> 400 (%s)" % st)
    # Chunked trailers arrive through the header callbacks after the headers were
    # indexed (found by tests/fuzz http): they are discarded, not indexed, and the
    # daemon keeps serving (it crashed with SIGSEGV, no token needed).
    st, body = raw_status_json(d.raw(b"POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\n"
                                     b"Transfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n"
                                     b"X-A: 1\r\nX-B: 2\r\n\r\n"))
    check(st == 401 and d.request("GET", "/healthz")[0] == 200,
          "chunked body with trailers: 401 (no token) and numvald still up (%s)" % st)
    # A request with no header at all (HTTP/1.0): no pointer arithmetic on a NULL
    # header buffer (UBSan aborts the sanitizer build on it).
    st, body = raw_status_json(d.raw(b"GET /api/v1/jobs HTTP/1.0\r\n\r\n"))
    check(st == 200 and d.request("GET", "/healthz")[0] == 200,
          "a request without headers is served (%s)" % st)
    expect(d, "unknown route", 404, "not_found", d.request("GET", "/api/v1/nothing"))
    expect(d, "missing job", 404, "not_found", d.request("GET", "/api/v1/jobs/987654"))
    expect(d, "wrong method", 405, "method_not_allowed",
           d.request("DELETE", "/api/v1/jobs", scope="admin"))
    expect(d, "bad state filter", 400, "bad_request", d.request("GET", "/api/v1/jobs?state=zzz"),
           field="state")
    expect(d, "bad limit", 400, "bad_request", d.request("GET", "/api/v1/jobs?limit=-4"),
           field="limit")
    expect(d, "claim without device", 400, "bad_request",
           d.request("POST", "/api/v1/worker/claim", body={"wait_ms": 1}, scope="worker"),
           field="/device")
    expect(d, "result with a made-up lease", 409, "conflict",
           d.request("POST", "/api/v1/worker/result", scope="worker",
                     body={"job_id": 1, "lease_token": "nope", "result": {"verdict": "passed"}}))
    expect(d, "heartbeat of a missing job", 404, "not_found",
           d.request("POST", "/api/v1/worker/heartbeat", scope="worker",
                     body={"job_id": 99999, "lease_token": "x"}))


def get_raw(d, path, inm=None):
    """(status, raw body, ETag header) of a GET, with If-None-Match when given."""
    c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
    try:
        c.request("GET", path, headers={"If-None-Match": inm} if inm else {})
        r = c.getresponse()
        return r.status, r.read(), r.getheader("ETag")
    finally:
        c.close()


def conditional_get(d, jid):
    """GET JSON answers carry a weak ETag, the first 128 bits of the body's
    SHA-256 (hashed here with hashlib, independently of common/sha256.c); a
    matching If-None-Match gets 304 without a body (RFC 9110 §13.1.2, §15.4.5)."""
    path = "/api/v1/jobs/%d" % jid
    st, body, tag = get_raw(d, path)
    want = 'W/"%s"' % hashlib.sha256(body).hexdigest()[:32]
    check(st == 200 and tag == want, "GET job: ETag %s (got %s %s)" % (want, st, tag))
    st, again, tag2 = get_raw(d, path, inm=tag)
    check(st == 304 and again == b"" and tag2 == tag, "If-None-Match of the ETag -> 304, no body "
          "(got %s, %d bytes)" % (st, len(again)))
    st, _, _ = get_raw(d, path, inm='"0000", ' + tag[2:])
    check(st == 304, "weak comparison in a list: the tag without W/ matches too (got %s)" % st)
    st, _, _ = get_raw(d, path, inm="*")
    check(st == 304, "If-None-Match: * -> 304 (got %s)" % st)
    st, other, _ = get_raw(d, path, inm='W/"00000000000000000000000000000000"')
    check(st == 200 and other == body, "another tag -> 200 with the same body (got %s)" % st)
    st, _, _ = d.request("POST", path + "/cancel", scope="submit")
    check(st == 200, "cancel the job (got %s)" % st)
    st, changed, tag3 = get_raw(d, path, inm=tag)
    check(st == 200 and tag3 != tag and b'"cancelled"' in changed,
          "changed job -> 200 with a new ETag (got %s %s)" % (st, tag3))
    st, _, r = d.request("POST", "/api/v1/jobs", body=GOOD, scope="submit")
    check(st == 201 and r.getheader("ETag") is None, "no ETag on a POST answer")
    st, _, _ = get_raw(d, "/api/v1/jobs/999999", inm="*")
    check(st == 404, "errors are never 304 (got %s)" % st)


def test(numvald):
    with Daemon(numvald, limits={"header_timeout_ms": 1000, "max_job_body": 1 << 20}) as d:
        d.start()
        stored = []
        for i in range(5):
            spec = dict(GOOD, seed=100 + i)
            st, body, _ = d.request("POST", "/api/v1/jobs", body=spec, scope="submit")
            check(st == 201 and body["job"]["state"] == "queued", "job %d stored" % i)
            stored.append((body["job"]["id"], spec))
        corpus(d)
        check(d.alive(), "numvald is still running after the corpus")
        st, body, _ = d.request("GET", "/healthz")
        check(st == 200 and body["status"] == "ok", "/healthz still 200")
        for jid, spec in stored:
            st, body, _ = d.request("GET", "/api/v1/jobs/%d" % jid)
            check(st == 200 and body["job"]["spec"] == spec and body["job"]["state"] == "queued",
                  "job %d intact" % jid)
        st, body, _ = d.request("GET", "/api/v1/jobs?limit=100")
        check(st == 200 and len(body["jobs"]) == 5, "exactly the 5 stored jobs, nothing extra")
        st, body, _ = d.request("POST", "/api/v1/jobs", body=GOOD, scope="submit")
        check(st == 201, "a new submission still works")
        conditional_get(d, stored[0][0])
        st, body, r = d.request("GET", "/")
        check(st == 200 and r.getheader("Content-Type").startswith("text/html"),
              "static index.html with text/html")
        st, body, r = d.request("GET", "/app.js")
        check(st == 200 and r.getheader("Content-Type").startswith("text/javascript"),
              "static .js with text/javascript")
        rc, reports = d.stop()
        check(rc == 0 and not reports,
              "SIGTERM: clean exit 0, no sanitizer report (%s %s)" % (rc, reports[:3]))

    with Daemon(numvald, limits={"queue_depth": 3}) as d:
        d.start()
        for i in range(3):
            st, _, _ = d.request("POST", "/api/v1/jobs", body=dict(GOOD, seed=i), scope="submit")
            check(st == 201, "queue_depth 3: job %d accepted" % i)
        expect(d, "fourth job on a full queue", 429, "queue_full",
               d.request("POST", "/api/v1/jobs", body=GOOD, scope="submit"))
        st, _, _ = d.request("POST", "/api/v1/worker/claim", body={"device": "d"}, scope="worker")
        check(st == 200, "a worker takes one job")
        st, _, _ = d.request("POST", "/api/v1/jobs", body=GOOD, scope="submit")
        check(st == 201, "then there is room again")


if __name__ == "__main__":
    main(test)
