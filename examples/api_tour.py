"""The Python API in one page: the four jobs of lbtheory on the bundled three-cell topology
(its output is quoted in README.md and re-checked by tests/test_readme_commands.py)."""

import lbtheory as lb

net = lb.load_topology("examples/three_cells.yaml")          # 3 cells, delays in seconds
ue = lb.solve_wardrop(net)                                     # selfish routing (latency cost)
poa = lb.price_of_anarchy(net)                                 # Wardrop ÷ system optimum
print(f"Wardrop mean latency {ue.mean_latency * 1e3:.1f} ms, price of anarchy {poa.ratio:.4f}")

crit = lb.critical_stepsize(net, "gradient")                   # exact limit of the delayed model
report = lb.check_stepsize(net, "gradient", 0.5)               # verdict at a chosen stepsize
print(f"η_crit {crit.critical_stepsize:.4f} 1/s², η = 0.5 is {report.verdict}")

fluid = lb.simulate_fluid(net, mechanism="flow", cost="gradient", stepsize=0.5, t1=60.0,
                          equilibrium="auto")              # also track the distance to N*
print(f"fluid model at 60 s: {fluid.status.value}, "
      f"distance to equilibrium {float(fluid.distance_to_equilibrium[-1]):.1e} requests")

scenario = lb.load_scenario("examples/sim_two_cells.yaml")
for policy in ("rand", "flow-grad"):
    res = lb.simulate_cells(scenario, lb.make_router(policy, "cells"),
                            duration_s=120.0, seed=1)
    s = res.summary()
    print(f"{policy:>9}: {s['completed']} requests, mean latency {s['latency']['mean']:.3f} s")
