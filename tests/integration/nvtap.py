"""TAP output shared by the integration tests: numbered ok lines with up to
30 lines of diagnostics, the plan printed last, and SIGTERM (meson's timeout)
turned into SystemExit so each test's temp-dir and process cleanup runs."""
import signal

_count = 0
_failed = 0


def _sigterm(signum, frame):
    raise SystemExit(128 + signum)


signal.signal(signal.SIGTERM, _sigterm)


def ok(cond, what, diag=None):
    """One TAP line; diag (a string or a list of lines) is printed as comments
    when cond is false."""
    global _count, _failed
    _count += 1
    if not cond:
        _failed += 1
        lines = diag if isinstance(diag, list) else str(diag or "").splitlines()
        for line in lines[:30]:
            print("# " + str(line))
    print(("ok" if cond else "not ok") + " %d - %s" % (_count, what), flush=True)


def failures():
    return _failed


def finish():
    """Print the plan; the exit status: 1 when any check failed."""
    print("1..%d" % _count, flush=True)
    return 1 if _failed else 0


def checks():
    """How many checks ran so far (tests use it to name per-run files)."""
    return _count
