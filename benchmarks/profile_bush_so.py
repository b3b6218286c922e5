"""Where the bush solver's time goes: its passes against its certificates, for the Wardrop
equilibrium, the system optimum from scratch and the system optimum warm-started from the
equilibrium's bushes (issue 24, item 2: why the optimum takes longer).

Wraps ``_bushkernels.bush_pass`` and the solver's ``certificate_gap`` with timers (one thread),
and prints per solve: seconds, iterations, passes (seconds, share, seconds per pass),
certificates (seconds, share) and every ~8th gap of the certificate history.

Run: ``OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/profile_bush_so.py [SIZE] [GAP]``
(default ``chicago_sketch 1e-10``).
"""

from __future__ import annotations

import os
import sys
import time

from lbtheory.games import _bush, bush_assignment
from lbtheory.games import _bushkernels as bk
from lbtheory.games.synthetic import synthetic_network

ACC = {"pass": 0.0, "cert": 0.0, "npass": 0}
_PASS, _CERT = bk.bush_pass, _bush.certificate_gap


def _timed_pass(*args, **kwargs):
    t = time.perf_counter()
    out = _PASS(*args, **kwargs)
    ACC["pass"] += time.perf_counter() - t
    ACC["npass"] += 1
    return out


def _timed_certificate(*args, **kwargs):
    t = time.perf_counter()
    out = _CERT(*args, **kwargs)
    ACC["cert"] += time.perf_counter() - t
    return out


def main() -> None:
    size = sys.argv[1] if len(sys.argv) > 1 else "chicago_sketch"
    tol = float(sys.argv[2]) if len(sys.argv) > 2 else 1e-10
    bk.bush_pass, _bush.certificate_gap = _timed_pass, _timed_certificate
    warm_up = synthetic_network("anaheim")[0]  # load the cached kernels
    bush_assignment(warm_up, tol=1e-6)
    bush_assignment(warm_up, tol=1e-6, objective="system_optimum")
    game = synthetic_network(size, seed=0)[0]
    print(f"{size}, tol {tol:g}, load {os.getloadavg()[0]:.2f}")
    state = None
    for label, objective, warm in (("wardrop", "wardrop", False),
                                   ("SO cold", "system_optimum", False),
                                   ("SO warm", "system_optimum", True)):
        ACC.update({"pass": 0.0, "cert": 0.0, "npass": 0})
        t = time.perf_counter()
        res = bush_assignment(game, objective=objective, tol=tol, threads=1,
                              warm=state if warm else None)
        st = res.state
        total = time.perf_counter() - t
        if objective == "wardrop":
            state = st
        hist = st.history
        path = " ".join(f"{g:.0e}" for _, _, g in hist[::max(1, len(hist) // 8)])
        print(f"{label:8} {total:6.2f} s, {res.iterations} iterations ({ACC['npass']} passes: "
              f"{ACC['pass']:.2f} s = {ACC['pass'] / total:.0%}, "
              f"{ACC['pass'] / max(ACC['npass'], 1):.3f} s/pass; certificates "
              f"{ACC['cert']:.2f} s = {ACC['cert'] / total:.0%}); gap path {path}")
    print(f"load at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
