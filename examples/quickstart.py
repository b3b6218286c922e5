"""Quick tour of the Python API (its output is quoted in README.md)."""

import jax

from lbtheory.equilibrium import price_of_anarchy
from lbtheory.fluid import simulate_fluid
from lbtheory.instances import symmetric_two_cell
from lbtheory.stability import critical_stepsize

jax.config.update("jax_enable_x64", True)  # float64 for the fluid model (an entry point may)

net = symmetric_two_cell()                      # THEORY §7.5: μ̄ = 10, K = 5, Λ = 12, τ = 50 ms
poa = price_of_anarchy(net)
print("N* (system optimum):", poa.system_optimum.workload[:2], "residual",
      f"{poa.system_optimum.residual:.1e}")
crit = critical_stepsize(net, "gradient")
print(f"exact critical stepsize {crit.critical_stepsize:.6f} (THEORY: 0.536158), "
      f"period at onset {crit.period:.3f} s")
for factor in (0.9, 1.1):
    sol = simulate_fluid(net, mechanism="flow", cost="gradient",
                         stepsize=factor * crit.critical_stepsize, t1=60.0, dt=1e-3,
                         N0=[9.0, 6.0, 0.0])
    late = sol.t >= 50.0
    swing = abs(sol.workload[late, 0] - sol.workload[late, 1]).max()
    print(f"η = {factor:.1f}·η_crit: max |N1 − N2| over t ∈ [50, 60] s = {swing:.3g} "
          f"requests (3 at t = 0)")
