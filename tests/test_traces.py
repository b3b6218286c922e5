"""Trace readers: the bundled Azure copy, other column names, and every bad-input path."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lbtheory.errors import DataFormatError
from lbtheory.workloads import TraceOrderWarning, read_trace, trace_from_arrays

TRACES = Path(__file__).resolve().parents[1] / "examples" / "traces"


def test_azure_conv_matches_published_facts():
    tr = read_trace(TRACES / "AzureLLMInferenceTrace_conv.csv")
    # Facts from the shared data README (computed there, not by this code).
    assert len(tr) == 19366
    assert tr.prompt_tokens.mean() == pytest.approx(1155, abs=0.5)
    assert tr.output_tokens.mean() == pytest.approx(211, abs=0.5)
    assert tr.prompt_tokens.max() == 14050 and tr.output_tokens.max() == 1000
    assert tr.arrival_s[0] == 0.0 and tr.arrival_s[-1] == pytest.approx(3502, abs=1)
    # first two rows: 18:15:46.6805900 and 18:15:50.9951690
    assert tr.arrival_s[1] == pytest.approx(4.314579, abs=1e-6)
    assert tr.prompt_key is None


def test_jsonl_with_other_names_and_keys(tmp_path):
    p = tmp_path / "t.jsonl"
    rows = [{"arrival_time": 1.5, "prompt_tokens": 10, "output_tokens": 3, "prompt_hash": "a"},
            {"arrival_time": 2.0, "prompt_tokens": 7, "output_tokens": 0, "prompt_hash": "b"}]
    p.write_text("\n".join(json.dumps(r) for r in rows))
    tr = read_trace(p)
    assert tr.arrival_s.tolist() == [0.0, 0.5]
    assert tr.prompt_tokens.tolist() == [10, 7] and tr.output_tokens.tolist() == [3, 0]
    assert tr.prompt_key == ("a", "b")


def _csv(tmp_path, text: str) -> Path:
    p = tmp_path / "t.csv"
    p.write_text(text)
    return p


def test_missing_column(tmp_path):
    p = _csv(tmp_path, "TIMESTAMP,ContextTokens\n0,5\n")
    with pytest.raises(DataFormatError, match=r"t\.csv:1: missing column for output") as e:
        read_trace(p)
    assert e.value.field == "output"


def test_negative_tokens(tmp_path):
    p = _csv(tmp_path, "time,prompt_tokens,output_tokens\n0,5,1\n1,-3,2\n")
    with pytest.raises(DataFormatError, match=r":3: negative token count -3 in prompt_tokens"):
        read_trace(p)


def test_non_numeric_and_non_integer(tmp_path):
    with pytest.raises(DataFormatError, match=r":2: output_tokens value 'x' is not a number"):
        read_trace(_csv(tmp_path, "time,prompt_tokens,output_tokens\n0,5,x\n"))
    with pytest.raises(DataFormatError, match=r"token count 2.5 in output_tokens is not an int"):
        read_trace(_csv(tmp_path, "time,prompt_tokens,output_tokens\n0,5,2.5\n"))
    with pytest.raises(DataFormatError, match=r"cannot parse time 'yesterday'"):
        read_trace(_csv(tmp_path, "time,prompt_tokens,output_tokens\nyesterday,5,2\n"))


def test_empty_trace(tmp_path):
    with pytest.raises(DataFormatError, match="trace has no requests"):
        read_trace(_csv(tmp_path, "time,prompt_tokens,output_tokens\n"))


def test_unsorted_sorts_with_warning_or_refuses(tmp_path):
    p = _csv(tmp_path, "time,prompt_tokens,output_tokens\n5,1,1\n3,2,2\n4,3,3\n")
    with pytest.warns(TraceOrderWarning, match=r":3: timestamps are not sorted"):
        tr = read_trace(p)
    assert tr.prompt_tokens.tolist() == [2, 3, 1]
    assert tr.arrival_s.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(DataFormatError, match=r":3: timestamps are not sorted") as e:
        read_trace(p, on_unsorted="error")
    assert e.value.line == 3


def test_from_arrays_length_mismatch():
    with pytest.raises(DataFormatError, match="columns have different lengths"):
        trace_from_arrays([0, 1], [1], [1, 2])
    with pytest.raises(DataFormatError, match="arrival is not a finite number"):
        trace_from_arrays([0, np.nan], [1, 1], [1, 2])


def test_head_and_select():
    tr = trace_from_arrays([0, 1, 2], [1, 2, 3], [4, 5, 6], prompt_key=["a", "b", "c"])
    assert len(tr.head(2)) == 2
    sub = tr.select(np.array([False, True, True]))
    assert sub.arrival_s.tolist() == [0.0, 1.0] and sub.prompt_key == ("b", "c")


def test_empty_field_and_bad_jsonl(tmp_path):
    with pytest.raises(DataFormatError, match=r":2: empty ContextTokens"):
        read_trace(_csv(tmp_path, "TIMESTAMP,ContextTokens,GeneratedTokens\n0,,3\n"))
    p = tmp_path / "t.jsonl"
    p.write_text('{"time": 0, "prompt_tokens": 1, "output_tokens": 1}\n{"time": 1,\n')
    with pytest.raises(DataFormatError, match=r"t\.jsonl:2: invalid JSON"):
        read_trace(p)
    p.write_text('{"time": 0, "prompt_tokens": 1, "output_tokens": 1}\n[1, 2]\n')
    with pytest.raises(DataFormatError, match=r"t\.jsonl:2: each JSONL line must be an object"):
        read_trace(p)
