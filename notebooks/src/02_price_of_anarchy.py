CELLS = [
("md", """
# 02 — Price of anarchy in routing games

Nonatomic routing games on general networks (`lbtheory.games`): the Wardrop (user) equilibrium
minimises the Beckmann potential, the system optimum minimises total travel time, both solved in
CVXPY (Clarabel) in arc-flow form with flows aggregated by origin. The price of anarchy (PoA) is
TSTT(UE) / TSTT(SO). The oracles below are closed forms from the literature (Pigou, Roughgarden's
bound for polynomials of degree d) and THEORY §5 (M/M/1 links, Braess).
"""),
("code", """
import numpy as np
import matplotlib.pyplot as plt
from lbtheory.equilibrium import price_of_anarchy, solve_wardrop
from lbtheory.games import (FWMethod, pigou, pigou_poa, mm1_two_link, mm1_two_link_poa, braess,
                            frank_wolfe, load_tntp_game)
from lbtheory.plotting import figure, POLICY_COLORS
"""),
("md", """
## Pigou: linear and degree d
Two parallel links with costs 1 and x^d, unit demand. Selfish users all take the x^d link; the
optimum splits. For d = 1 the PoA is 4/3; for degree d it equals Roughgarden's bound
(1 − d(d+1)^{−(d+1)/d})^{−1}, which no game with degree-d polynomial costs exceeds.
`price_of_anarchy` (the same verb as for cell networks) returns the ratio together with both
solutions and a status.
"""),
("code", """
for d in [1, 2, 3, 4, 2.5]:
    poa = price_of_anarchy(pigou(d))
    print(f"d = {d:>3}: PoA = {poa.ratio:.9f}   bound = {pigou_poa(d):.9f}   "
          f"diff = {poa.ratio - pigou_poa(d):.1e}   ({poa.status})")
"""),
("md", """
## M/M/1 links
A link with M/M/1 delay 1/(u − x) parallel to a constant link 1/(u − R), demand R. The PoA is
½(1 + √(u/(u − R))) (THEORY §5) and grows without bound as R → u: with queueing delays there is no
constant bound.
"""),
("code", """
for u, R in [(1.0, 0.5), (1.0, 0.9), (1.0, 0.99)]:
    print(f"u = {u}, R = {R}: PoA = {price_of_anarchy(mm1_two_link(u, R)).ratio:.9f}   "
          f"closed form = {mm1_two_link_poa(u, R):.9f}")
"""),
("md", """
## Braess, from the TNTP file, with and without the bridge
The TNTP Braess example (BPR costs, demand 6 from node 1 to node 2). At equilibrium 2 units use each
of the three paths, every path costs 92 and the total is 552. Removing the bridge 3 → 4 gives path
cost 83 and total 498, which is also the system optimum: adding a road made everyone worse off.
"""),
("code", """
game = load_tntp_game("../examples/tntp/Braess-Example/Braess_net.tntp",
                      "../examples/tntp/Braess-Example/Braess_trips.tntp")
poa = price_of_anarchy(game)
ue, so = poa.wardrop, poa.optimum
nb = solve_wardrop(game.without_arcs([game.arc_index(3, 4)]))
for name, r in [("UE with bridge", ue), ("UE without bridge", nb), ("system optimum", so)]:
    print(f"{name:18} flows {np.round(r.arc_flow, 6)}  TSTT {r.total_travel_time:.6f}  "
          f"relative gap {r.relative_gap:.1e}")
print("path cost 1-3-2 at UE:", round(ue.arc_cost[0] + ue.arc_cost[2], 6),
      " without bridge:", round(nb.arc_cost[0] + nb.arc_cost[2], 6))
print("PoA:", poa.ratio)
"""),
("md", """
The reference Frank–Wolfe traffic assignment (bi-conjugate directions, exact line search) gives
the same equilibrium independently of CVXPY.
"""),
("code", """
fw = frank_wolfe(game, method=FWMethod.BFW, tol=1e-10)
print(fw.iterations, "iterations, TSTT", fw.total_travel_time, "gap", fw.relative_gap)
"""),
("md", """
## PoA of the Braess network as a function of demand
A parametric curve: at low demand everyone uses the bridge path and the optimum agrees; in the
middle range the bridge hurts (the Braess paradox); at high demand the bridge is unused at
equilibrium and PoA returns to 1. The full sweep is `experiments/poa_braess.py`.
"""),
("code", """
demands = np.linspace(0.25, 12.25, 49)
poa = [price_of_anarchy(braess(float(d))).ratio for d in demands]
fig, ax = figure()
ax.plot(demands, poa, color=POLICY_COLORS["wardrop"])
ax.axhline(4 / 3, ls="--", color="0.5", lw=0.8, label="affine bound 4/3")
ax.set_xlabel("demand 1 → 2 (vehicles per unit time)")
ax.set_ylabel("PoA = TSTT(UE) / TSTT(SO)"); ax.legend()
print(f"largest PoA on this grid: {max(poa):.4f} at demand {demands[int(np.argmax(poa))]:.2f}")
"""),
]
