"""Tune the flow-routing stepsize η by gradient descent (optax) after a demand step.

The three-cell example network runs at its system optimum for 60% of its demand; at t = 0 the
demand jumps to 100%. Flow routing with the gradient cost re-balances; a small η is sluggish (high
latency during the transient), a large one overshoots and — past the stability limit — oscillates.
We minimise the time-averaged total latency rate J(η) over the 20 s after the step with Adam on
log η, using the fluid model's exact derivative (forward mode). When a step lands in the
oscillating regime, :func:`lbtheory.fluid.fluid_sensitivity` flags the derivative as not well posed
(``well_posed=False``) instead of returning a meaningless number; we then back off.

    .venv/bin/python examples/optax_stepsize_tuning.py
"""

from __future__ import annotations

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from lbtheory.equilibrium import solve_system_optimum  # noqa: E402
from lbtheory.fluid import fluid_sensitivity  # noqa: E402
from lbtheory.io import load_topology  # noqa: E402


def main(iterations: int = 30, eta0: float = 0.5) -> dict:
    """Run the tuning loop; returns the history (η, J, dJ/dη) per iteration."""
    net = load_topology("examples/three_cells.yaml")
    before = solve_system_optimum(net.with_demand_scale(0.6))
    kw = dict(cost="gradient", t1=20.0, N0=before.workload, x0=before.routing)
    log_eta = jnp.log(eta0)
    opt = optax.adam(learning_rate=0.3)
    state = opt.init(log_eta)
    history = []
    for it in range(iterations):
        eta = float(jnp.exp(log_eta))
        s = fluid_sensitivity(net, stepsize=eta, wrt=("stepsize",), throw=False, **kw)
        history.append((eta, s.value, s.gradient["stepsize"], s.well_posed))
        print(f"{it:3d}  η = {eta:8.4f}  J = {s.value:9.5f} request·s/s  "
              f"dJ/dη = {s.gradient['stepsize']:+.4e}  {'' if s.well_posed else 'OSCILLATING'}")
        if not s.well_posed:  # back off: the long-horizon derivative is meaningless here
            log_eta = log_eta - jnp.log(2.0)
            state = opt.init(log_eta)
            continue
        grad_log = s.gradient["stepsize"] * eta  # chain rule through η = exp(log η)
        updates, state = opt.update(jnp.asarray(grad_log), state)
        log_eta = optax.apply_updates(log_eta, updates)
    best = min((h for h in history if h[3]), key=lambda h: h[1])
    print(f"best η = {best[0]:.4f}: J = {best[1]:.5f} request·s/s "
          f"(mean latency {best[1] / net.total_demand:.5f} s) vs J(η0) = {history[0][1]:.5f}")
    return {"history": np.array([h[:3] for h in history]), "best_eta": best[0]}


if __name__ == "__main__":
    main()
