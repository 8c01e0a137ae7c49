#!/usr/bin/env python3
"""`meson install --destdir` into a temp dir: the installed tree holds what a running
service needs, and it runs from the install alone. The installed numvald starts with
its installed numvald.ini (relocated into the destdir, data dir and port made temp:
what a chroot or a package gives), tells a $NOTIFY_SOCKET it is ready, serves the
installed web UI and /healthz, and an installed numval-worker (token from
--token-file) runs one job of the installed smoke suite that the installed numvalctl
submits and waits for.

usage: test_install.py MESON BUILD_ROOT SOURCE_ROOT MAN(0|1)"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

MESON, BUILD, SRC, MAN = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"


def _sigterm(signum, frame):
    raise SystemExit(128 + signum)


signal.signal(signal.SIGTERM, _sigterm)
n_ok = 0


class Fail(Exception):
    pass


def check(cond, what):
    global n_ok
    if not cond:
        raise Fail(what)
    n_ok += 1
    print("ok -", what, flush=True)


def installed_map():
    """{source or build path: install path} from meson itself, so the test follows
    the configured prefix instead of assuming one."""
    p = subprocess.run([MESON, "introspect", "--installed", BUILD], capture_output=True,
                       text=True, timeout=120)
    check(p.returncode == 0, "meson introspect --installed (%s)" % p.stderr[-300:])
    return {os.path.normpath(k): v for k, v in json.loads(p.stdout).items()}


def dest_of(inst, suffix):
    hits = [v for v in inst.values() if v.endswith(suffix)]
    check(len(hits) == 1, "one installed path ends with %s (%s)" % (suffix, hits))
    return hits[0]


def check_tree(dest, inst):
    D = lambda p: dest + p  # noqa: E731 (absolute install path under the destdir)
    numvald = dest_of(inst, "/numvald")
    check(numvald.endswith("/sbin/numvald") and os.access(D(numvald), os.X_OK),
          "numvald installed in sbin/, executable")
    for b in ("numval-worker", "numvalctl"):
        p = dest_of(inst, "/bin/" + b)
        check(os.access(D(p), os.X_OK), "%s installed executable" % b)
    ini = dest_of(inst, "/numval/numvald.ini")
    check(os.path.isfile(D(ini)), "numvald.ini installed in the config dir (%s)" % ini)
    check(os.stat(D(ini)).st_mode & 0o007 == 0, "numvald.ini is not world-readable")
    for u in ("numvald.service", "numval-worker@.service", "numval-prune.service",
              "numval-prune.timer"):
        p = dest_of(inst, "/" + u)
        check(os.path.isfile(D(p)) and "/systemd/system/" in p, "unit %s installed" % u)
    if MAN:
        for page in ("man8/numvald.8", "man1/numval-worker.1", "man1/numvalctl.1",
                     "man5/numvald.ini.5"):
            check(os.path.isfile(D(dest_of(inst, "/" + page))), "man page %s installed" % page)
    else:
        print("# scdoc not found at configure time: no man pages to check")
    web = inst[os.path.normpath(os.path.join(SRC, "web"))]
    share = os.path.dirname(web)
    # Every shipped file of the web UI and every suite, compared byte for byte.
    for sub in ("web", "suites"):
        top = os.path.join(SRC, sub)
        missing, differ = [], []
        for d, _, files in os.walk(top):
            for f in files:
                rel = os.path.relpath(os.path.join(d, f), SRC)
                if rel == os.path.join("web", "app", "package.json"):
                    continue
                got = D(os.path.join(share, rel))
                if not os.path.isfile(got):
                    missing.append(rel)
                elif open(got, "rb").read() != open(os.path.join(SRC, rel), "rb").read():
                    differ.append(rel)
        check(not missing and not differ, "every file of %s/ installed unchanged (missing %s, "
              "differ %s)" % (sub, missing[:5], differ[:5]))
    check(os.path.isfile(D(share + "/web/index.html")), "web/index.html installed")
    # torch_harness.py imports its siblings: a module left out breaks the installed harness.
    harness = sorted(f for f in os.listdir(os.path.join(SRC, "worker", "harness")) if f.endswith(".py"))
    gone = [f for f in harness if not os.path.isfile(D(share + "/harness/" + f))]
    check(len(harness) >= 6 and not gone, "every harness module installed (missing %s)" % gone)
    for f in ("schema/001_init.sql", "schema/005_token_devices.sql", "schema/result.schema.json",
              "suites/smoke.json", "nginx/numval.conf"):
        check(os.path.isfile(D(share + "/" + f)), "%s installed in %s" % (f, share))
    return numvald, ini, share


def relocate_ini(dest, ini, data, out):
    """The installed config with its absolute paths moved under the destdir, data_dir
    a temp dir and the port free. Each relocated path must exist in the install."""
    lines, seen = [], {}
    section = ""
    for line in open(dest + ini).read().splitlines():
        s = line.strip()
        if s.startswith("["):
            section = s
        if section == "[server]" and "=" in s and not s.startswith("#"):
            k, v = [x.strip() for x in s.split("=", 1)]
            seen[k] = v
            if k == "data_dir":
                line = "data_dir = " + data
            elif k == "listen":
                line = "listen = 127.0.0.1:0"
            elif v.startswith("/") and k != "js_dir":
                line = "%s = %s%s" % (k, dest, v)
                check(os.path.exists(dest + v), "installed config's %s (%s) is in the install"
                      % (k, v))
        lines.append(line)
    for k in ("data_dir", "web_dir", "worker"):
        check(k in seen and seen[k].startswith("/"), "installed config sets %s to an absolute "
              "path (%s)" % (k, seen.get(k)))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    return seen


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read()


def run(tmp):
    dest = os.path.join(tmp, "dest")
    p = subprocess.run([MESON, "install", "-C", BUILD, "--destdir", dest, "--no-rebuild",
                        "--quiet"], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, "meson install --destdir succeeds (%s)" % (p.stdout + p.stderr)[-500:])
    inst = installed_map()
    numvald, ini, share = check_tree(dest, inst)
    worker = dest + dest_of(inst, "/bin/numval-worker")
    ctl = dest + dest_of(inst, "/bin/numvalctl")

    data = os.path.join(tmp, "data")
    conf = os.path.join(tmp, "numvald.ini")
    seen = relocate_ini(dest, ini, data, conf)
    check(seen["data_dir"].endswith("/lib/numval"), "installed data_dir is LOCALSTATEDIR/lib/numval")

    # systemd's readiness protocol: a datagram socket numvald writes READY=1 to.
    nsock_path = os.path.join(tmp, "notify")
    nsock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    nsock.bind(nsock_path)
    nsock.settimeout(60)
    port_file = os.path.join(tmp, "port")
    env = dict(os.environ, NOTIFY_SOCKET=nsock_path)
    procs = []
    try:
        log = open(os.path.join(tmp, "numvald.log"), "wb")
        d = subprocess.Popen([dest + numvald, "--config", conf, "--port-file", port_file],
                             stdout=log, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
        procs.append(d)
        try:
            msg = nsock.recv(4096).decode()
        except socket.timeout:
            msg = ""
        check("READY=1" in msg.split("\n"), "numvald sent READY=1 to $NOTIFY_SOCKET (%r)" % msg)
        port = int(open(port_file).read())
        url = "http://127.0.0.1:%d" % port
        st, body = get(url + "/healthz")
        check(st == 200, "installed numvald answers /healthz once ready")
        st, body = get(url + "/")
        check(st == 200 and body == open(os.path.join(SRC, "web", "index.html"), "rb").read(),
              "GET / serves the installed web UI's index.html")
        st, body = get(url + "/app/app.js")
        check(st == 200 and body == open(os.path.join(SRC, "web", "app", "app.js"), "rb").read(),
              "GET /app/app.js serves the installed module")
        logtxt = open(os.path.join(tmp, "numvald.log")).read()
        check(("web " + dest) in logtxt, "numvald names the installed web dir in its log")

        def token(name, scope):
            p = subprocess.run([dest + numvald, "--config", conf, "token", "create", name,
                                "--scope", scope], capture_output=True, text=True, timeout=30)
            check(p.returncode == 0, "token create %s (%s)" % (name, p.stderr[-200:]))
            return p.stdout.strip().split()[-1]

        tok_file = os.path.join(tmp, "worker.token")
        fd = os.open(tok_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, (token("it-worker", "worker") + "\n").encode())
        os.close(fd)
        submit_tok = token("it-submit", "submit,read")

        # --token-file refuses what is not one token on one line, naming the file.
        for name, content, says in (("empty", "\n", "is empty"),
                                    ("two", "tok1 tok2\n", "white space"),
                                    ("big", "x" * 5000, "longer than")):
            path = os.path.join(tmp, "bad-" + name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.write(fd, content.encode())
            os.close(fd)
            p = subprocess.run([worker, "--server", url, "--token-file", path, "--device", "x",
                                "--backend", "emu", "--once"], capture_output=True, text=True,
                               timeout=30)
            check(p.returncode == 2 and says in p.stderr and path in p.stderr,
                  "--token-file with a %s file: exit 2, '%s' (%s)" % (name, says,
                                                                   p.stderr.strip()[-200:]))
        p = subprocess.run([worker, "--server", url, "--token-file", os.path.join(tmp, "none"),
                            "--device", "x", "--backend", "emu", "--once"], capture_output=True,
                           text=True, timeout=30)
        check(p.returncode == 2 and "cannot open token file" in p.stderr,
              "--token-file with a missing file: exit 2, named")

        # One smoke job that passes on emu (the suite's jobs with expect_error test
        # refusals, not a device).
        suite = json.load(open(dest + share + "/suites/smoke.json"))
        job = next(j for j in suite["jobs"] if "expect_error" not in j and j["kind"] == "op")
        job_path = os.path.join(tmp, "job.json")
        json.dump(job, open(job_path, "w"))
        wlog = open(os.path.join(tmp, "worker.log"), "wb")
        w = subprocess.Popen([worker, "--server", url, "--token-file", tok_file, "--device",
                              "it-emu", "--backend", "emu", "--once", "--claim-wait-ms", "1000"],
                             stdout=wlog, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(w)
        p = subprocess.run([ctl, "--server", url, "--token", submit_tok, "submit", job_path,
                            "--wait", "--timeout", "240"], capture_output=True, text=True,
                           timeout=300)
        check(p.returncode == 0, "installed numvalctl: the smoke job (%s) passes on the installed "
              "worker (rc %d: %s)" % (job["op"], p.returncode, p.stderr[-400:]))
        check(w.wait(timeout=60) == 0, "installed worker (--token-file, --once) exits 0")
        st, body = get(url + "/api/v1/jobs")
        jobs = json.loads(body)["jobs"]
        check(len(jobs) == 1 and jobs[0]["state"] == "passed",
              "the store holds the one job, passed (%s)" % [j.get("state") for j in jobs])
        d.send_signal(signal.SIGTERM)
        check(d.wait(timeout=30) == 0, "installed numvald stops cleanly on SIGTERM")
        try:
            msg = nsock.recv(4096).decode()
        except socket.timeout:
            msg = ""
        check("STOPPING=1" in msg.split("\n"), "numvald sent STOPPING=1 on SIGTERM (%r)" % msg)
        bad = [l for name in ("numvald.log", "worker.log")
               for l in open(os.path.join(tmp, name), errors="replace").read().splitlines()
               if "Sanitizer" in l or "runtime error:" in l]
        check(not bad, "no sanitizer report in the daemon's or the worker's log (%s)" % bad[:3])
    except Exception:
        for name in ("numvald.log", "worker.log"):
            path = os.path.join(tmp, name)
            if os.path.exists(path):
                print("# --- %s ---" % name)
                for line in open(path, errors="replace").read().splitlines()[-30:]:
                    print("# " + line)
        raise
    finally:
        for pr in procs:
            if pr.poll() is None:
                os.killpg(pr.pid, signal.SIGKILL)
                pr.wait()
        nsock.close()


def main():
    tmp = tempfile.mkdtemp(prefix="numval-install-")
    try:
        run(tmp)
    except Fail as e:
        print("not ok -", e, flush=True)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("# %d checks passed" % n_ok)
    return 0


if __name__ == "__main__":
    sys.exit(main())
