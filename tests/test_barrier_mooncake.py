"""Mooncake-format JSONL traces (ms timestamps, prefix-block hashes) and ExactMatch on them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lbtheory.barrier import ExactMatchPredictor
from lbtheory.cli import main
from lbtheory.errors import DataFormatError
from lbtheory.workloads import read_trace

MOON = Path(__file__).resolve().parents[1] / "examples" / "traces" / "mooncake_synthetic.jsonl"


def test_read_mooncake():
    tr = read_trace(MOON)
    assert len(tr) == 12
    assert np.allclose(tr.arrival_s, np.arange(12) * 0.25)      # 250 ms apart → seconds
    assert tr.prompt_tokens[:3].tolist() == [1024, 512, 1536]
    assert tr.output_tokens[:3].tolist() == [12, 3, 40]
    assert tr.prompt_key[0] == tr.prompt_key[3] == tr.prompt_key[10] == "0-1"
    assert tr.prompt_key[2] == "0-1-3" and tr.prompt_key[11] == ""


def test_exact_match_keys_on_prefix_hashes():
    tr = read_trace(MOON)
    # "0-1" took 12 steps, "2" took 3
    pred = ExactMatchPredictor(tr.prompt_key).observe([0, 1], [12, 3])
    p, mu = pred.predict(np.array([3, 4, 2]), np.array([0, 1, 0]), 80)
    assert p.tolist() == [1.0, 1.0, 1.0]
    # hits: 12 − 0 and 3 − 1 steps; the miss "0-1-3" gets the survival mean (12 + 3) / 2
    assert mu.tolist() == [12.0, 2.0, 7.5]


def test_cli_accepts_mooncake(capsys):
    rc = main(["barrier", str(MOON), "--replicas", "2", "--slots", "2",
               "--policies", "jsq,br0,brh-exactmatch", "--json", "--horizon", "8"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["requests"] == 12
    from lbtheory.barrier import DecodeConfig, simulate_decode
    from lbtheory.registry import make_router

    tr = read_trace(MOON)
    for name in ("jsq", "br0", "brh-exactmatch"):
        extra = {"workload": tr, "horizon": 8} if name.startswith("brh") else {}
        want = simulate_decode(tr, make_router(name, "replicas", **extra),
                               config=DecodeConfig(replicas=2, slots=2)).summary()
        assert out["policies"][name]["mean_imbalance"] == pytest.approx(want["mean_imbalance"])
        assert out["policies"][name]["mean_imbalance"] > 0


def test_bad_hash_ids(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"timestamp": 0, "input_length": 5, "output_length": 2, "hash_ids": [1]}\n'
                 '{"timestamp": 9, "input_length": 5, "output_length": 2, "hash_ids": "x"}\n')
    with pytest.raises(DataFormatError, match="hash_ids must be a list") as err:
        read_trace(f)
    assert str(err.value).startswith(f"{f}:2: ")
