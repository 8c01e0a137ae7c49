#!/usr/bin/env python3
"""Peers for bench/compare_bench.c: numpy.allclose and torch.testing.assert_close
on the same fp32 arrays (raw little-endian fp32 file: got then ref).

usage: compare_peers.py FILE N REPEATS
Prints "NAME: MS ms" lines (best of REPEATS) that compare_bench parses."""
import sys
import time


def best(fn, reps):
    # Process CPU time (all threads), like compare_bench: the machine is shared.
    t = float("inf")
    for _ in range(reps):
        t0 = time.process_time()
        fn()
        t = min(t, time.process_time() - t0)
    return t * 1e3


def main():
    path, n, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    import numpy as np

    a = np.fromfile(path, dtype="<f4", count=2 * n)
    got, ref = a[:n], a[n:]
    # Same tolerance as the C side's allclose run; every pair passes it.
    rtol, atol = 1e-5, 1e-8
    ok = np.allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)
    ms = best(lambda: np.allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True), reps)
    print(f"numpy.allclose: {ms:.1f} ms (numpy {np.__version__}, result {ok})")
    try:
        import torch
    except ImportError as e:
        print(f"torch unavailable: {e}")
        return
    tg, tr = torch.from_numpy(got), torch.from_numpy(ref)
    ms = best(lambda: torch.testing.assert_close(tg, tr, rtol=rtol, atol=atol, equal_nan=True),
              reps)
    print(f"torch.testing.assert_close: {ms:.1f} ms (torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads)")


if __name__ == "__main__":
    main()
