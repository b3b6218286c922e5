CELLS = [
("md", """
# 01 — Equilibria of a cell network and the price of anarchy

DLB's flow routing converges to the equilibrium of its cost signal (THEORY §5): **latency**
routing to the Wardrop equilibrium, **gradient** routing to the system optimum, **RIF** routing
to the RIF equilibrium. Each is the minimiser of a convex potential, solved here with CVXPY
(Clarabel) and polished to Definition-1 residuals near machine precision.
The three programs are THEORY's reconstruction **[R]** (direct substitution into (12)).
"""),
("code", """
import numpy as np
import lbtheory
from lbtheory.io import load_topology
from lbtheory.equilibrium import price_of_anarchy, demand_sweep
from lbtheory.commands.equilibrium import format_table

net = load_topology("../examples/three_cells.yaml")
poa = price_of_anarchy(net)
print(format_table(net, poa))
"""),
("md", """
## The three equilibria side by side
Wardrop routing keeps requests local until local latency reaches the remote latency plus the
round trip; the system optimum spills earlier because it prices the queueing a request imposes
on others; RIF ignores the network and equalises requests per replica.
"""),
("code", """
for key in ("wardrop", "system_optimum", "rif"):
    eq = getattr(poa, key)
    print(f"{key:15s} mean latency {eq.mean_latency*1e3:7.2f} ms   inflow {np.round(eq.inflow, 3)}"
          f"   residual {eq.residual:.1e}")
assert poa.system_optimum.total_latency_rate <= poa.wardrop.total_latency_rate
"""),
("md", """
## Price of anarchy as demand grows
The programs are built once with CVXPY parameters and re-solved (DPP) for every demand level.
"""),
("code", """
util0 = net.total_demand / net.max_rates.sum()
sweep = demand_sweep(net, np.linspace(0.05, 0.95, 19) / util0)
for u, p, r in zip(sweep["utilisation"], sweep["price_of_anarchy"], sweep["rif_ratio"]):
    print(f"utilisation {u:5.2f}   PoA {p:7.4f}   RIF/opt {r:7.4f}")
"""),
("code", """
from lbtheory.plotting import plot_equilibria
fig = plot_equilibria(net, poa, sweep)
"""),
("md", """
## A Pigou-style instance that attains its bound
A local M/M/1 cell (capacity u, latency 1/(u − z)) and a remote cell with negligible serving time
behind a round trip 1/(u − r) (THEORY §5). As the remote serving time goes to zero, the PoA tends
to Roughgarden's M/M/1 bound ½(1 + √(u/(u − r))): e.g. 1.207107 for u = 1, r = 0.5.
"""),
("code", """
from lbtheory.instances import mm1_pigou, mm1_pigou_poa
for remote_K in (1e-1, 1e-2, 1e-3, 1e-5):
    p = price_of_anarchy(mm1_pigou(u=1.0, r=0.5, remote_capacity=1e5, remote_K=remote_K))
    print(f"remote K {remote_K:7.0e}: PoA {p.price_of_anarchy:.7f}   bound {mm1_pigou_poa(1.0, 0.5):.7f}")
for r in (0.3, 0.6, 0.9, 0.99):
    p = price_of_anarchy(mm1_pigou(u=1.0, r=r))
    print(f"r = {r}: PoA {p.price_of_anarchy:.6f}  closed form {mm1_pigou_poa(1.0, r):.6f}")
"""),
]
