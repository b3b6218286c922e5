"""Exact critical stepsizes of networks against THEORY §7.5–7.6 oracles and independent builds."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import sympy as sp
from scipy.optimize import brentq

from lbtheory.equilibrium import EquilibriumProblem, polish_on_support, solve_system_optimum
from lbtheory.errors import InfeasibleDemandError, StabilityStatus
from lbtheory.fluid import simulate_fluid
from lbtheory.instances import random_network, spill_example, symmetric_two_cell
from lbtheory.models import MM1Latency
from lbtheory.network import Arc, Cell, CellNetwork
from lbtheory.stability import (
    BoundaryEquilibriumError,
    LinearDDE,
    StepsizeError,
    check_stepsize,
    critical_stepsize,
    empirical_rule,
    linearise,
    operating_point,
    rightmost_roots,
    spectrum,
    symmetric_threshold,
    theorem1_form,
)


def hand_equilibrium_symmetric(net):
    """THEORY §7.5 by hand: each frontend splits evenly, N* = 7.5 in both cells."""
    x = np.zeros((net.n, net.n))
    for i, lam in enumerate(net.arrival_rates):
        if lam > 0:
            x[i, net.index("c1")] = x[i, net.index("c2")] = 0.5
    N = np.zeros(net.n)
    N[[net.index("c1"), net.index("c2")]] = 7.5
    return SimpleNamespace(routing=x, workload=N)


@pytest.mark.parametrize("cost,expected", [("gradient", 0.536158), ("latency", 2.68079),
                                           ("rif", 0.268079)])
def test_symmetric_two_cell_oracle(cost, expected):
    net = symmetric_two_cell()
    cr = critical_stepsize(net, cost, equilibrium=hand_equilibrium_symmetric(net))
    assert cr.verified
    assert abs(cr.critical_stepsize - expected) < 1e-6 * expected
    closed = symmetric_threshold(net, cr.linearisation.point)
    assert closed is not None
    assert abs(cr.critical_stepsize - closed.eta_crit) < 1e-9 * closed.eta_crit
    assert abs(cr.frequency - closed.omega) < 1e-8 * closed.omega
    assert abs(cr.period - closed.period) < 1e-7 * closed.period
    # THEORY §7.5: θ = 0.177937, K_crit = 3.21695 (gradient), bounds a/T ≤ K_crit ≤ (π/2)a/T
    assert abs(closed.theta - 0.177937) < 1e-6
    assert closed.eta_lower <= cr.critical_stepsize <= closed.eta_upper


def test_symmetric_two_cell_with_solver_equilibrium():
    cr = critical_stepsize(symmetric_two_cell(), "gradient")
    assert abs(cr.critical_stepsize - 0.536158128) < 1e-8


def test_two_frontends_neutral_mode_removed_by_coordinates():
    net = symmetric_two_cell(frontends=2)
    cr = critical_stepsize(net, "gradient", equilibrium=hand_equilibrium_symmetric(net))
    lin = cr.linearisation
    assert lin.conserved_removed == 2
    assert lin.neutral_removed == 1  # the difference of the two frontends' splits
    assert lin.structural_zeros == 0
    assert abs(cr.critical_stepsize - 0.536158) < 1e-6 * 0.536158


def test_spill_example_oracle():
    net = spill_example()
    cr = critical_stepsize(net, "gradient")
    pt = cr.linearisation.point
    assert abs(pt.routing[0, 0] - 0.642893) < 1e-6
    assert pt.support.tolist() == [[True, True], [False, True]]
    assert np.allclose(pt.workload, [45.0250, 44.9750], atol=1e-4)
    assert abs(cr.critical_stepsize - 0.0143024) < 1e-6 * 0.0143024


def test_spill_reduced_characteristic_equation():
    """THEORY §7.5: s + (η λ₁/2)[f'₁/(s + a₁) + f'₂ e^{−2sτ}/(s + a₂)] = 0 at the crossing."""
    net = spill_example()
    cr = critical_stepsize(net, "gradient")
    pt = cr.linearisation.point
    s, eta, lam1, tau = cr.crossing_root, cr.critical_stepsize, 14.0, 0.05
    fp, a = pt.cost_prime, pt.rate_prime
    val = s + 0.5 * eta * lam1 * (fp[0] / (s + a[0]) + fp[1] * np.exp(-2 * s * tau) / (s + a[1]))
    assert abs(val) < 1e-9 * abs(s)
    assert abs(pt.routing[0, 0] - spill_split_brentq()) < 1e-10


def spill_split_brentq():
    """x*_11 of the spill example from its equal-cost condition, solved independently (brentq):
    f(N(14x)) = f(N(14(1 − x) + 4)) + 2τ with f = (N + K)²/(μ̄K), N(z) = Kz/(μ̄ − z)."""
    f = lambda N: (N + 5.0) ** 2 / 50.0  # noqa: E731 - gradient cost of MM1Latency(10, 5)
    Ninv = lambda z: 5.0 * z / (10.0 - z)  # noqa: E731
    return brentq(lambda x: f(Ninv(14 * x)) - f(Ninv(14 * (1 - x) + 4)) - 0.1, 0.5, 0.7,
                  xtol=1e-15)


def test_operating_point_uses_the_one_polish():
    """An unpolished solver result (routing off by ~1e-8) is Newton-polished to the brentq root;
    an already polished EquilibriumResult is taken as is (zero Newton steps)."""
    net = spill_example()
    raw = EquilibriumProblem(net, "gradient").solve(polish=False)
    x = spill_split_brentq()
    assert not raw.polished and abs(raw.routing[0, 0] - x) > 1e-10
    pt = operating_point(net, "gradient", equilibrium=raw)
    assert abs(pt.routing[0, 0] - x) < 1e-13 and pt.residual < 1e-12
    eq = solve_system_optimum(net)
    assert eq.polished
    kept = polish_on_support(net, "gradient", eq.routing, eq.workload, polished=True)
    assert kept.steps == 0 and abs(kept.routing[0, 0] - x) < 1e-13
    assert operating_point(net, "gradient", equilibrium=eq).routing[0, 0] == kept.routing[0, 0]


def test_two_cell_characteristic_equation_derived_with_sympy():
    """§7.6 equations in raw coordinates (x1, x2, N1, N2) → det = s (s + a)(s² + as + Ke^{−2sτ})."""
    s, eta, lam, fp, a, tau = sp.symbols("s eta lambda fp a tau", positive=True)
    E = sp.exp(-s * tau)
    # rows: δx1' = −η[f'N1(t−τ) − (f'N1 + f'N2)(t−τ)/2], δx2' likewise, δN_j' = λ δx_j(t−τ) − aN_j
    A = sp.Matrix([[0, 0, -eta * fp * E / 2, eta * fp * E / 2],
                   [0, 0, eta * fp * E / 2, -eta * fp * E / 2],
                   [lam * E, 0, -a, 0],
                   [0, lam * E, 0, -a]])
    det = sp.factor(sp.simplify((s * sp.eye(4) - A).det()))
    K = eta * lam * fp
    expected = s * (s + a) * (s**2 + a * s + K * sp.exp(-2 * s * tau))
    assert sp.simplify(det - expected) == 0
    # the package's reduced DDE has the same roots: det Δ_pkg(s) = (s + μ'_f(0)) det/s
    net = symmetric_two_cell()
    lin = linearise(net, "gradient", equilibrium=hand_equilibrium_symmetric(net))
    pt = lin.point
    vals = {eta: 0.7, lam: 12.0, fp: pt.cost_prime[0], a: pt.rate_prime[0], tau: 0.05}
    passive = pt.rate_prime[net.index("f")]
    dde = lin.dde(0.7)
    for z in (0.3 + 1.1j, -0.2 + 2.5j, 1.7 - 0.4j):
        mine = np.linalg.det(dde.characteristic_matrix(z))
        ref = complex((det / s).subs(vals).subs(s, z).evalf()) * (z + passive)
        assert abs(mine - ref) < 1e-10 * abs(ref)


def raw_linear_dde(net, pt, eta):
    """§7.6 linearisation built directly in raw coordinates (δx_ij on the support, δN_j)."""
    lam, n = net.arrival_rates, net.n
    arcs = [(i, j) for i in range(n) for j in range(n) if pt.support[i, j]]
    P = len(arcs)
    d = P + n
    terms = [(0.0, np.diag(np.concatenate([np.zeros(P), -pt.rate_prime])))]
    for p, (i, j) in enumerate(arcs):
        S = [q for q, (k, _) in enumerate(arcs) if k == i]
        for q in S:  # routing row p depends on N_{j_q}(t − τ_{i j_q})
            jq = arcs[q][1]
            A = np.zeros((d, d))
            A[p, P + jq] = -eta * pt.cost_prime[jq] * ((p == q) - 1.0 / len(S))
            terms.append((net.delays[i, jq], A))
        A = np.zeros((d, d))
        A[P + j, p] = lam[i]
        terms.append((net.delays[i, j], A))
    return LinearDDE.from_terms(d, terms)


@pytest.mark.parametrize("seed", [3, 11])
def test_reduced_coordinates_match_raw_system(seed):
    net = random_network(4, seed=seed, utilisation=0.8, arc_prob=0.7)
    lin = linearise(net, "gradient")
    eta = 2.0 * empirical_rule(net, lin.point)[0]
    mine = spectrum(lin, eta, count=4)
    raw = rightmost_roots(raw_linear_dde(net, lin.point, eta), count=4)
    # the raw system carries the removed structural zeros (one per source, incl. vertex sources
    # whose single routing weight is frozen); its other roots are the same
    sources = int(np.sum(net.arrival_rates > 0))
    assert raw.structural_zeros == sources + lin.neutral_removed + lin.structural_zeros
    assert abs(mine.rightmost - raw.rightmost) < 1e-8 * max(1.0, abs(raw.rightmost))


def test_critical_is_where_spectrum_changes_sign_and_weights_scale():
    net = random_network(4, seed=5, utilisation=0.85, arc_prob=0.8)
    cr = critical_stepsize(net, "gradient")
    assert cr.verified and math.isfinite(cr.critical_stepsize)
    lin = cr.linearisation
    assert spectrum(lin, 0.999 * cr.critical_stepsize).abscissa < 0
    assert spectrum(lin, 1.001 * cr.critical_stepsize).abscissa > 0
    cr2 = critical_stepsize(net, "gradient", weights=2.0 * np.ones(net.n))
    assert abs(cr2.critical_stepsize - 0.5 * cr.critical_stepsize) < 1e-9 * cr.critical_stepsize


def test_empirical_rule_symmetric_is_the_lower_bound():
    """§7.6 rule reduces to K < a/T in §7.5: μ'/(Λ f' T) = 0.32/(12·0.5·0.1)."""
    net = symmetric_two_cell()
    lin = linearise(net, "gradient", equilibrium=hand_equilibrium_symmetric(net))
    rule, per = empirical_rule(net, lin.point)
    assert abs(rule - 0.32 / (12 * 0.5 * 0.1)) < 1e-12
    assert np.isinf(per[net.index("c1")])


def test_derivatives_match_sympy_and_finite_differences():
    """f'_j and μ'_j at N*: sympy derivatives of the M/M/1 closed forms (μ = μ̄N/(N + K),
    latency ℓ = N/μ, gradient cost 1/μ'), and central differences of a softplus service
    model's ℓ(N) and μ(N) (second differences of μ for the gradient cost −μ''/μ'²)."""
    Ns, mbar, K = sp.symbols("N mubar K", positive=True)
    mu = mbar * Ns / (Ns + K)
    net = spill_example()  # MM1Latency(10, 5) in both cells
    for cost, f in (("latency", Ns / mu), ("gradient", 1 / sp.diff(mu, Ns))):
        pt = linearise(net, cost).point
        for j in range(net.n):
            at = {Ns: pt.workload[j], mbar: 10.0, K: 5.0}
            assert pt.cost_prime[j] == pytest.approx(float(sp.diff(f, Ns).subs(at)), rel=1e-12)
            assert pt.rate_prime[j] == pytest.approx(float(sp.diff(mu, Ns).subs(at)), rel=1e-12)
    soft = random_network(3, seed=0, softplus_share=1.0, arc_prob=1.0,
                          utilisation=0.8)
    h = 1e-3
    for cost in ("latency", "gradient"):
        pt = operating_point(soft, cost)
        assert pt.workload.min() > 10 * h
        for j, m in enumerate(soft.services):
            N = pt.workload[j]
            mu1 = (m.rate(N + h) - m.rate(N - h)) / (2 * h)
            if cost == "latency":
                fd, rtol = (m.latency(N + h) - m.latency(N - h)) / (2 * h), 1e-7
            else:
                mu2 = (m.rate(N + h) - 2 * m.rate(N) + m.rate(N - h)) / h**2
                fd, rtol = -mu2 / mu1**2, 1e-4
            assert pt.cost_prime[j] == pytest.approx(fd, rel=rtol)
            assert pt.rate_prime[j] == pytest.approx(mu1, rel=1e-7)


def test_no_free_routing_means_stable_for_every_stepsize():
    svc = MM1Latency(10.0, 5.0)
    # a is lightly loaded and stays local (vertex with a strict cost gap): nothing to oscillate
    net = CellNetwork([Cell("a", 1, 3.0, svc), Cell("b", 1, 6.0, svc)],
                      [Arc("a", "a", 0.0), Arc("a", "b", 0.05), Arc("b", "b", 0.0)])
    rep = check_stepsize(net, "gradient", 100.0)
    assert math.isinf(rep.critical.critical_stepsize)
    assert rep.verdict == "stable"
    slowest = min(float(svc.rate_prime(svc.inverse_rate(z))) for z in (3.0, 6.0))
    assert abs(rep.decay_rate - slowest) < 1e-9


def test_check_stepsize_verdicts():
    net = symmetric_two_cell()
    eq = hand_equilibrium_symmetric(net)
    below = check_stepsize(net, "gradient", 0.5, equilibrium=eq)
    above = check_stepsize(net, "gradient", 0.6, equilibrium=eq)
    assert below.verdict == "stable" and below.decay_rate > 0
    assert above.verdict == "unstable" and above.rightmost_root.real > 0
    # the status enum says the same; the JSON keeps the verdict's word and the critical
    # stepsize's own status
    assert below.status is StabilityStatus.STABLE and above.status is StabilityStatus.UNSTABLE
    assert above.to_dict()["verdict"] == "unstable"
    assert above.to_dict()["status"] == above.critical.status.value
    assert abs(below.margin - 0.536158128 / 0.5) < 1e-7
    # the period, measured independently: zero crossings of N_c1 − N_c2 in the nonlinear fluid
    # model at the same stepsize (just above the threshold), started near the equilibrium
    x0 = eq.routing.copy()
    x0[2, :2] = [0.5 + 1e-4, 0.5 - 1e-4]
    sol = simulate_fluid(net, cost="gradient", stepsize=0.6, t1=30.0, dt=1e-3, x0=x0,
                         N0=eq.workload)
    t, W = np.asarray(sol.t), np.asarray(sol.workload)
    d = W[:, 0] - W[:, 1]
    k = np.flatnonzero(np.sign(d[1:]) != np.sign(d[:-1]))
    k = k[t[k] > 5.0]  # after the transient of the faster modes
    crossings = t[k] - d[k] * (t[k + 1] - t[k]) / (d[k + 1] - d[k])
    assert len(crossings) >= 10
    assert above.period == pytest.approx(2 * np.mean(np.diff(crossings)), rel=1e-5)
    d = below.to_dict()
    for key in ("critical_stepsize", "empirical_rule", "rightmost_root", "verdict"):
        assert key in d


def test_theorem1_form_rate_weighted_delay():
    net = spill_example()
    lin = linearise(net, "gradient")
    th = theorem1_form(net, lin.point)
    x = lin.point.routing
    assert abs(th.rate_weighted_delay - 14 * x[0, 1] * 0.05 / 18) < 1e-12
    assert "not public" in th.statement
    assert th.first_term(10.0, 0.5) == pytest.approx(18 / 5.0)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, "fast"])
def test_bad_stepsize(bad):
    with pytest.raises(StepsizeError, match="stepsize: expected a positive"):
        check_stepsize(symmetric_two_cell(), "gradient", bad)


def test_bad_weights():
    net = symmetric_two_cell()
    with pytest.raises(StepsizeError, match="weights: expected 3 stepsize weights"):
        linearise(net, "gradient", weights=[1.0, 1.0])
    with pytest.raises(StepsizeError, match=r"weights\['f'\]: expected a positive"):
        linearise(net, "gradient", weights=[1.0, 1.0, -2.0])


def boundary_network():
    """Spill-like pair where frontend c1 is exactly at its spill threshold (x*_12 = 0, c = c*)."""
    svc = MM1Latency(10.0, 5.0)
    # gradient cost f = 50/(10 − z)²; local costs differ by exactly 2τ = 0.1
    lam1 = 10.0 - math.sqrt(50.0 / (50.0 / 36.0 + 0.1))
    net = CellNetwork([Cell("c1", 1, lam1, svc), Cell("c2", 1, 4.0, svc)],
                      [Arc("c1", "c1", 0.0), Arc("c1", "c2", 0.05), Arc("c2", "c2", 0.0),
                       Arc("c2", "c1", 0.05)])
    eq = SimpleNamespace(routing=np.eye(2), workload=np.array([svc.inverse_rate(lam1),
                                                               svc.inverse_rate(4.0)]))
    return net, eq


def test_boundary_equilibrium_names_the_arc():
    net, eq = boundary_network()
    with pytest.raises(BoundaryEquilibriumError, match=r"arcs c1 -> c2 \(x\*=0") as info:
        critical_stepsize(net, "gradient", equilibrium=eq)
    assert info.value.arcs == (("c1", "c2"),)


def test_boundary_detected_from_solver_equilibrium():
    net, _ = boundary_network()
    with pytest.raises(BoundaryEquilibriumError, match="strict complementarity fails"):
        linearise(net, "gradient")


def test_assumption_2_violated():
    svc = MM1Latency(10.0, 5.0)
    net = CellNetwork([Cell("a", 1, 12.0, svc)], [Arc("a", "a", 0.0)])
    with pytest.raises(InfeasibleDemandError, match="infeasible demand"):
        critical_stepsize(net, "gradient")


def test_non_unique_rif_routing_is_moved_inside_the_face():
    """RIF: every source sees the same cost of a cell, so a vertex equilibrium with zero flow on a
    tied arc is not a boundary — the routing is moved to the relative interior (max-min LP)."""
    svc = MM1Latency(10.0, 5.0)
    cells = [Cell("c1", 1, 0.0, svc), Cell("c2", 1, 0.0, svc), Cell("f1", 1, 6.0, svc),
             Cell("f2", 1, 6.0, svc)]
    arcs = [Arc("f1", "c1", 0.01), Arc("f1", "c2", 0.03), Arc("f2", "c1", 0.02),
            Arc("f2", "c2", 0.05)]
    net = CellNetwork(cells, arcs)
    N = np.array([7.5, 7.5, 0.0, 0.0])
    vertex = np.zeros((4, 4))
    vertex[2, 0] = vertex[3, 1] = 1.0
    interior = np.zeros((4, 4))
    interior[2, :2] = interior[3, :2] = 0.5
    lin = linearise(net, "rif", equilibrium=SimpleNamespace(routing=vertex, workload=N))
    assert lin.point.support[2:, :2].all()
    assert np.allclose(lin.point.routing[2:, :2], 0.5)
    # inflow-neutral only in total (different delays): one zero root, removed by count
    assert lin.neutral_removed == 0 and lin.structural_zeros == 1
    cr = critical_stepsize(net, "rif", linearisation=lin)
    ref = critical_stepsize(net, "rif", equilibrium=SimpleNamespace(routing=interior, workload=N))
    assert cr.verified
    assert abs(cr.critical_stepsize - ref.critical_stepsize) < 1e-10 * ref.critical_stepsize
    raw = rightmost_roots(raw_linear_dde(net, lin.point, cr.critical_stepsize * 1.2), count=4)
    mine = spectrum(lin, cr.critical_stepsize * 1.2, count=4)
    assert abs(raw.rightmost - mine.rightmost) < 1e-8 * abs(mine.rightmost)


def test_probe_period_adds_half_a_period_to_the_feedback_delay():
    """THEORY §3: routers that probe every δ see τ^fb = τ + δ/2, i.e. the loop delay of §7.5
    becomes T = 2τ + δ/2. The symmetric two-cell oracle with that T, solved here from
    θ tan θ = aT and K_crit = θ²/(T² cos θ) (a = 0.32, f' = 0.5, Λ = 12), against
    critical_stepsize(..., probe_period_s=δ); δ = 0 changes nothing."""
    net = symmetric_two_cell()
    a, fp, lam, tau = 0.32, 0.5, 12.0, 0.05
    for delta in (0.0, 0.04, 0.2):
        T = 2 * tau + delta / 2
        theta = brentq(lambda th, aT=a * T: th * math.tan(th) - aT, 1e-12, math.pi / 2 - 1e-12)
        closed = theta ** 2 / (T ** 2 * math.cos(theta)) / (lam * fp)
        cr = critical_stepsize(net, "gradient", probe_period_s=delta)
        assert abs(cr.critical_stepsize - closed) < 1e-7 * closed
    assert critical_stepsize(net, "gradient", probe_period_s=0.0).critical_stepsize == \
        pytest.approx(0.536158128, rel=1e-8)
    with pytest.raises(Exception, match="probe_period_s"):
        critical_stepsize(net, "gradient", probe_period_s=-1.0)
