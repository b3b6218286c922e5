"""The fast TNTP readers (block parsing, issue 37) against their reference twins: the same
arrays on every bundled network and on a synthetic one (through the fast path, not the
fallback), and on random edits of the numbers and the layout the same arrays or the same error
(message, file, line, field)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lbtheory.errors import DataFormatError
from lbtheory.games import tntp
from lbtheory.games.synthetic import synthetic_network

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = sorted((ROOT / "examples" / "tntp").rglob("*.tntp"))


def _read(path, kind: str, engine: str):
    read = tntp.read_tntp_network if kind == "net" else tntp.read_tntp_trips
    try:
        return read(path, engine=engine)
    except DataFormatError as exc:
        return ("error", str(exc), exc.path, exc.line, exc.field)


def _same(a, b) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        return a == b
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            if not (x.dtype.kind == y.dtype.kind and np.array_equal(x, y)):
                return False
        elif x != y:
            return False
    return True


def _kind(path: Path) -> str:
    return "net" if path.name.endswith("_net.tntp") else "trips"


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: str(p.relative_to(ROOT)))
def test_bundled_networks_read_the_same_through_the_fast_path(path: Path) -> None:
    kind = _kind(path)
    fast = (tntp._fast_network if kind == "net" else tntp._fast_trips)(str(path))
    assert fast is not None  # the canonical layout: no fallback
    assert _same(fast, tntp.read_tntp_network(path, engine="reference") if kind == "net"
                 else tntp.read_tntp_trips(path, engine="reference"))


def test_a_synthetic_network_reads_the_same(tmp_path: Path) -> None:
    game, data = synthetic_network("winnipeg", seed=3)
    net, trips = tmp_path / "w_net.tntp", tmp_path / "w_trips.tntp"
    tntp.write_tntp(net, trips, data)
    for path in (net, trips):
        assert _same(_read(path, _kind(path), "auto"), _read(path, _kind(path), "reference"))
    t = tntp.read_tntp_trips(trips)
    assert t.origins.size == np.count_nonzero(data["trips"])
    assert np.allclose(t.demand.sum(), data["trips"].sum())
    loaded = tntp.load_tntp_game(net, trips)
    assert np.array_equal(loaded.demand, game.demand) and loaded.n_arcs == game.n_arcs


NET_LINES = ["1 3 100 1 1 0.15 4 0 0 1 ;", "3 2 100 1 1 0.15 4 0 0 1;",
             "1 2 100 1 3 0.15 4 0 0 1 ;", "2 3 50 2 1.5 1e-3 2.5 0 0 1"]
TRIP_LINES = ["Origin 1", " 2 : 50; 3 : 1.5;", " 3 : 0;", "Origin 2", "1 : 20.25;",
              "ORIGIN 3", "1 : 1e2;  2 : 7;"]
TOKENS = st.sampled_from(["0", "-0", "-1", "1", "2", "3", "4", "4.7", "1e308", "inf", "nan",
                          "abc", "", ";", ":", ";;", "~ c", "1_0", "0x10", "1,5", "Origin",
                          "origin 2", "\n", " ", "\t", "2 : 3;", "+1", ".5", "1.", "١"])


@st.composite
def _edited(draw, lines: list[str]) -> str:
    """The lines with up to 3 random edits: a token inserted, replaced or removed."""
    lines = list(lines)
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        tok = lines[i].split(" ")
        j = draw(st.integers(0, len(tok) - 1))
        how = draw(st.sampled_from(["insert", "replace", "remove", "line"]))
        new = draw(TOKENS)
        if how == "insert":
            tok.insert(j, new)
        elif how == "replace":
            tok[j] = new
        elif how == "remove":
            del tok[j]
        else:
            lines.insert(i, new)
            continue
        lines[i] = " ".join(tok)
    return "\n".join(lines) + "\n"


@settings(max_examples=150, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(net=_edited(NET_LINES), trips=_edited(TRIP_LINES), links=st.sampled_from([4, 4, 4, 3]))
def test_random_edits_give_the_same_answer_or_the_same_error(net, trips, links, tmp_path):
    p = tmp_path / "e_net.tntp"
    p.write_text(f"<NUMBER OF ZONES> 3\n<NUMBER OF NODES> 3\n<FIRST THRU NODE> 1\n"
                 f"<NUMBER OF LINKS> {links}\n<END OF METADATA>\n~ header ;\n{net}")
    q = tmp_path / "e_trips.tntp"
    q.write_text(f"<NUMBER OF ZONES> 3\n<TOTAL OD FLOW> 0\n<END OF METADATA>\n\n{trips}")
    for path, kind in ((p, "net"), (q, "trips")):
        a, b = _read(path, kind, "auto"), _read(path, kind, "reference")
        assert _same(a, b), (path.read_text(), a, b)


# ------------------------------------------------------------------ the vectorised game
def _object_game(net_p: Path, trips_p: Path):
    """The game as the constructor builds it from one GameArc and Commodity per entry (the
    pre-issue-37 load_tntp_game)."""
    from lbtheory.games.arccosts import bpr, constant
    from lbtheory.games.game import Commodity, GameArc, RoutingGame

    net, trips = tntp.read_tntp_network(net_p), tntp.read_tntp_trips(trips_p)
    arcs = []
    for row, blocked in zip(net.links, net.blocked):
        t, h, cap, length, fft, b, power, _, toll = row[:9]
        extra = net.toll_factor * toll + net.distance_factor * length
        cost = constant(fft + extra) if blocked else bpr(fft, b, cap, power)
        if extra and not blocked:
            cost = dataclasses.replace(cost, a=cost.a + extra)
        arcs.append(GameArc(int(t), int(h), cost, bool(blocked)))
    keep = trips.origins != trips.destinations
    comms = [Commodity(int(o), int(d), float(q)) for o, d, q in
             zip(trips.origins[keep], trips.destinations[keep], trips.demand[keep])]
    return RoutingGame(list(range(1, net.nodes + 1)), arcs, comms,
                       non_through=list(range(1, net.first_thru_node)))


PAIRS = sorted({p.with_name(p.name.replace("_net.tntp", "")) for p in BUNDLED
                if p.name.endswith("_net.tntp")})


@pytest.mark.parametrize("stem", PAIRS, ids=lambda p: p.name)
def test_load_tntp_game_builds_the_constructors_game(stem: Path) -> None:
    net_p, trips_p = Path(f"{stem}_net.tntp"), Path(f"{stem}_trips.tntp")
    fast, ref = tntp.load_tntp_game(net_p, trips_p), _object_game(net_p, trips_p)
    for f in ("tails", "heads", "blocked", "non_through", "origins", "demand"):
        assert np.array_equal(getattr(fast, f), getattr(ref, f)), f
    assert fast.nodes == ref.nodes and fast.arcs == ref.arcs
    x = np.linspace(0.0, 3.0 * float(ref.demand.sum()), ref.n_arcs)
    for m in ("cost", "cost_prime", "potential", "marginal"):
        assert np.array_equal(getattr(fast.costs, m)(x), getattr(ref.costs, m)(x)), m
    assert [(type(f), f.group_key(), i.tolist()) for f, i in fast.costs.groups] == \
        [(type(f), f.group_key(), i.tolist()) for f, i in ref.costs.groups]


def test_repeated_od_pairs_sum_in_file_order(tmp_path: Path) -> None:
    net = tmp_path / "r_net.tntp"
    net.write_text("<NUMBER OF ZONES> 2\n<NUMBER OF NODES> 2\n<FIRST THRU NODE> 1\n"
                   "<NUMBER OF LINKS> 2\n<END OF METADATA>\n1 2 10 1 1 0.15 4 0 0 1 ;\n"
                   "2 1 10 1 1 0.15 4 0 0 1 ;\n")
    trips = tmp_path / "r_trips.tntp"
    trips.write_text("<NUMBER OF ZONES> 2\n<END OF METADATA>\nOrigin 1\n2 : 0.1; 2 : 0.2;\n"
                     "Origin 2\n1 : 1e16; 1 : 1; 1 : 1;\n")
    fast, ref = tntp.load_tntp_game(net, trips), _object_game(net, trips)
    assert np.array_equal(fast.demand, ref.demand)
    assert fast.demand[0, 1] == 0.1 + 0.2 and fast.demand[1, 0] == (1e16 + 1) + 1


@settings(max_examples=40, derandomize=True, deadline=None, database=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 12), m=st.integers(1, 40),
       zones=st.integers(0, 6))
def test_reaches_agrees_with_a_search_per_origin(seed, n, m, zones):
    """Oracle: :func:`reachable_nodes` over :func:`usable_arcs`, one search per origin."""
    from lbtheory.games.game import reachable_nodes, reaches, usable_arcs

    rng = np.random.default_rng(seed)
    tails, heads = rng.integers(0, n, m), rng.integers(0, n, m)
    blocked = rng.random(m) < 0.2
    non_through = np.arange(n) < min(zones, n)
    o, d = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
    want = np.concatenate([reachable_nodes(n, tails, heads,
                                           usable_arcs(tails, heads, blocked, non_through, v), v)
                           for v in range(n)])
    assert np.array_equal(reaches(n, tails, heads, blocked, non_through, o, d), want)
