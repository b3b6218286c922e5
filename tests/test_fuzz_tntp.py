"""Fuzz of the TNTP reader's numbers through the CLI (issue 23, kind 4): random tokens (nan, inf,
1e308, 1e-300, negatives, fractions, words) in the metadata counts, every link column and the
demands of a small valid network. ``lbtheory equilibrium NET --trips TRIPS --json`` must exit 2
with exactly one ``error:`` line and nothing on stdout, or exit 0 with a finite price of anarchy
≥ 1 — never a traceback, a leaked warning or a NaN. Derandomized and bounded."""

from __future__ import annotations

import json
import math
import warnings

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lbtheory.cli import main

META = {"NUMBER OF ZONES": "2", "NUMBER OF NODES": "3", "FIRST THRU NODE": "1",
        "NUMBER OF LINKS": "3"}
LINKS = [["1", "3", "100", "1", "1", "0.15", "4", "0", "0", "1"],
         ["3", "2", "100", "1", "1", "0.15", "4", "0", "0", "1"],
         ["1", "2", "100", "1", "3", "0.15", "4", "0", "0", "1"]]
DEMAND = [("1", "2", "50"), ("2", "1", "20")]

TOKENS = st.one_of(
    st.sampled_from(["0", "-0", "-1", "1", "2", "3", "4.7", "1e308", "-1e308", "1e-300", "5e-324",
                     "inf", "-inf", "nan", "1e12", "1000", "0.5", "abc", "", "1,5", "0x10"]),
    st.floats(min_value=0.0, max_value=500.0).map(repr),
)
PLACES = st.one_of(
    st.tuples(st.just("meta"), st.sampled_from(sorted(META))),
    st.tuples(st.just("link"), st.tuples(st.integers(0, 2), st.integers(0, 9))),
    st.tuples(st.just("demand"), st.tuples(st.integers(0, 1), st.integers(0, 2))),
)
EDITS = st.lists(st.tuples(PLACES, TOKENS), min_size=1, max_size=3)


def _files(tmp_path, edits) -> tuple[str, str]:
    meta, links, demand = dict(META), [list(r) for r in LINKS], [list(d) for d in DEMAND]
    for (where, at), token in edits:
        if where == "meta":
            meta[at] = token
        elif where == "link":
            links[at[0]][at[1]] = token
        else:
            demand[at[0]][at[1]] = token
    net = tmp_path / "f_net.tntp"
    net.write_text("".join(f"<{k}> {v}\n" for k, v in meta.items()) + "<END OF METADATA>\n"
                   + "".join("\t" + "\t".join(r) + "\t;\n" for r in links))
    trips = tmp_path / "f_trips.tntp"
    body = "".join(f"Origin {o}\n {d} : {q};\n" for o, d, q in demand)
    trips.write_text(f"<NUMBER OF ZONES> 2\n<TOTAL OD FLOW> 0\n<END OF METADATA>\n{body}")
    return str(net), str(trips)


@settings(max_examples=80, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(edits=EDITS)
def test_random_tntp_numbers_are_an_error_line_or_a_result(edits, tmp_path, capsys):
    net, trips = _files(tmp_path, edits)
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(["equilibrium", net, "--trips", trips, "--json"])
    out, err = capsys.readouterr()
    assert not [str(w.message) for w in caught], f"warnings leaked for {edits}"
    if code == 2:
        lines = err.splitlines()
        assert out == "" and len(lines) == 1 and lines[0].startswith("error: "), (edits, err)
        assert "f_net.tntp" in lines[0] or "f_trips.tntp" in lines[0], lines[0]
        return
    assert code == 0 and err == "", (edits, code, err)
    res = json.loads(out)
    assert math.isfinite(res["price_of_anarchy"]) and res["price_of_anarchy"] >= 1 - 1e-6, res
    for eq in res["equilibria"].values():
        assert eq["status"] in ("optimal", "optimal_inaccurate")
        assert math.isfinite(eq["total_travel_time"])
