"""``intelligent train`` shows progress within a second (a bar on a terminal's stderr, nothing
elsewhere), however many episodes and validation episodes it is given; ``train_dqn`` reports
through hooks (it prints nothing); clearer errors of the train/evaluate inputs."""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import lbtheory.intelligent as intelligent
from lbtheory.cli import main
from lbtheory.errors import LBTheoryError
from lbtheory.intelligent import ClusterConfig, DQNConfig, EnvConfig, train_dqn
from lbtheory.workloads import workload_from_arrays

ROOT = Path(__file__).resolve().parents[1]
CODE = ROOT / "examples" / "traces" / "AzureLLMInferenceTrace_code.csv"


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal and notes when it was first written to."""

    def __init__(self, tty: bool = True) -> None:
        super().__init__()
        self.tty, self.first = tty, None

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> int:
        if self.first is None and text.strip():
            self.first = time.monotonic()
        return super().write(text)


class _Stop(LBTheoryError):
    pass


@pytest.mark.parametrize("tty", [True, False])
def test_train_shows_a_bar_within_a_second_however_long_the_run(tmp_path, monkeypatch, tty):
    """1,000,000 episodes and 100,000 validation episodes: the bar is on stderr within a second
    (the run used to check every episode's workload first, silently, for minutes) and the
    validation episode under way is shown; no terminal, no bar."""
    seen = {}

    def fake_train(workload_fn, cluster, config, *, progress, tick, **kw):
        seen["called"] = time.monotonic()
        seen["before"] = err.getvalue()
        tick("validation", 0, 100000)  # the first of a round is always shown
        seen["validation"] = err.getvalue()
        raise _Stop("stopped by the test")

    monkeypatch.setattr(intelligent, "train_dqn", fake_train)
    err = _Terminal(tty)
    monkeypatch.setattr(sys, "stderr", err)
    t0 = time.monotonic()
    rc = main(["intelligent", "train", str(CODE), "--episodes", "1000000",
               "--validation-episodes", "100000", "--requests", "50", "--out",
               str(tmp_path / "ck")])
    assert rc == 2 and "stopped by the test" in err.getvalue()
    assert seen["called"] - t0 < 10.0  # not proportional to the episodes (was minutes)
    if tty:
        assert err.first - t0 < 1.0
        assert "train wg-rl" in seen["before"] and "0/1000000" in seen["before"]
        assert "validation episode 1/100000" in seen["validation"]
    else:  # (the overload warning is there, one line)
        assert "train wg-rl" not in seen["validation"] and "\r" not in seen["validation"]
    assert not (tmp_path / "ck").exists()


def _tiny_wf(seed: int):
    rng = np.random.default_rng(seed)
    n = 25
    return workload_from_arrays(np.sort(rng.uniform(0, 0.5, n)), rng.integers(1, 300, n),
                                rng.integers(1, 40, n))


def test_train_dqn_reports_decisions_and_validation_episodes_through_its_hooks(capsys):
    ticks, episodes = [], []
    cfg = ClusterConfig(n_instances=2, kv_budget_tokens=2000, max_batch=16)
    res = train_dqn(_tiny_wf, cfg, DQNConfig(router="rl", seed=1, episodes=2, learning_starts=32,
                                             batch_size=16, hidden=(8, 8),
                                             validation_episodes=3),
                    env_config=EnvConfig(max_wait_s=0.1),
                    progress=lambda k, s: episodes.append(k),
                    tick=lambda *a: ticks.append(a))
    assert episodes == [0, 1]
    assert [t for t in ticks if t[0] == "validation"] == [("validation", j, 3)
                                                          for _ in range(2) for j in range(3)]
    steps = [t[1] for t in ticks if t[0] == "step"]
    assert all(s % 256 == 0 and s > 0 for s in steps)
    assert len(steps) == sum(h["steps"] // 256 for h in res.history)
    out, err = capsys.readouterr()
    assert out == "" and err == ""  # library code prints nothing


@pytest.mark.parametrize("argv, match", [
    (["--predictor", "histogram", "--requests", "1"],
     "--predictor histogram fits its classifier on the first half of each trace and draws "
     "the --requests 1 of a run from the second half: the traces hold 1 request(s), 0 in "
     "their first halves and 1 in their second"),
    (["--requests", "5"], "--requests 5 exceeds the 1 request(s) the trace(s) hold"),
])
def test_too_short_traces_name_what_is_missing(tmp_path, capsys, argv, match):
    trace = tmp_path / "one.csv"
    trace.write_text("timestamp,prompt_tokens,output_tokens\n0,10,5\n")
    rc = main(["intelligent", "evaluate", str(trace), *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and match in err[0], err


@pytest.mark.parametrize("y", ["1e-9", "1e12"])
def test_appendix_b_y_out_of_scale_names_the_flag(capsys, y):
    rc = main(["simulate", "--appendix-b", "1", "--y", y, "--duration", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert err[0].startswith("error: --y: appendix_b.y must be in [") and "for seed 1" in err[0]
    assert "cell '" not in err[0]


def test_appendix_b_y_range_is_the_one_the_cells_accept():
    """The range the error states is where the generated cells stop being refused: just inside
    both ends the scenario builds, just outside the y error is raised (not a cell's)."""
    import re

    from lbtheory.errors import ParameterError
    from lbtheory.sim import appendix_b_scenario

    with pytest.raises(ParameterError) as info:
        appendix_b_scenario(1, y=1e-9, fit_latency=False)
    lo, hi = (float(v) for v in re.search(r"in \[([^,]+), ([^\]]+)\]", str(info.value)).groups())
    for y in (lo * 1.01, hi * 0.99):
        appendix_b_scenario(1, y=y, fit_latency=False)
    for y in (lo * 0.99, hi * 1.01):
        with pytest.raises(ParameterError, match=r"^appendix_b\.y must be in"):
            appendix_b_scenario(1, y=y, fit_latency=False)


def _short_trace(tmp: Path) -> str:
    path = tmp / "t.csv"
    path.write_text("".join(CODE.read_text().splitlines(keepends=True)[:61]))
    return str(path)


@pytest.mark.parametrize("extra, match", [
    (["--epoch", "1e308"], "--epoch must be in (0, 3600]"),
    (["--rate", "inf"], "--rate must be finite"),
    (["--lr", "1e30", "--learning-starts", "10", "--selection", "last"],
     "training diverged (non-finite loss or parameters at episode 0) and kept no finite "
     "network: nothing saved"),
])
def test_train_refusals_found_by_fuzzing_are_one_line(tmp_path, capsys, extra, match):
    """--epoch 1e308 named EnvConfig.horizon_s, --rate inf named rate_rps; a diverged training
    (lr 1e30) saved a NaN network that evaluate then ran as if trained."""
    out = tmp_path / "ck"
    rc = main(["intelligent", "train", _short_trace(tmp_path), "--requests", "20", "--episodes",
               "1", "--instances", "2", "--json", "--out", str(out), *extra])
    err = [ln for ln in capsys.readouterr().err.strip().splitlines()
           if not ln.startswith("warning:")]
    assert rc == 2 and len(err) == 1 and match in err[0], err
    assert not out.exists()


def test_train_refuses_a_symlinked_checkpoint_folder(tmp_path, capsys):
    """Renaming over a symbolic link replaces the link (the target keeps the old checkpoint and
    a stray link is left behind): refused, naming the folder it points to."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    rc = main(["intelligent", "train", _short_trace(tmp_path), "--requests", "20", "--out",
               str(tmp_path / "link"), "--overwrite"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "is a symbolic link" in err[0] and str(real) in err[0]
    assert (tmp_path / "link").is_symlink() and list(real.iterdir()) == []
