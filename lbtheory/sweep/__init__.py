"""Sweep runner: one way to run, cache and resume any grid of experiment cells (issue 12).

An :class:`Experiment` names a grid (``grid(profile) -> list[dict]``), a pure cell function
(``cell(config) -> dict``) and a summary writer (``collect(rows, out_dir, profile)``).
:func:`run_sweep` caches each cell's result under ``sha256`` of (name, config, lbtheory version),
written atomically as cells finish, so a killed sweep restarts where it stopped; cells run
in-process (``backend="serial"``), on a local Dask cluster (``"local"``) or on a remote Dask
scheduler (``"tcp://host:8786"``). ``lbtheory sweep`` is the CLI; experiment files also run as
scripts through :func:`script_main`.

Example::

    from lbtheory.sweep import Experiment, run_sweep

    EXPERIMENT = Experiment(name="squares", description="x squared",
                            grid=lambda profile: [{"x": x} for x in range(3)],
                            cell=square, collect=write_summary)
    res = run_sweep(EXPERIMENT, profile="quick", backend="local", workers=2)
    res.rows, res.computed, res.cached
"""

from ._experiment import (
    Experiment,
    cache_key,
    canonical_json,
    discover_experiments,
    load_experiments,
    select_experiments,
)
from ._runner import (
    CONNECT_TIMEOUT_S,
    SweepInterrupted,
    SweepResult,
    cell_path,
    dask_client,
    pending_cells,
    run_sweep,
)
from ._script import (
    add_run_arguments,
    describe_result,
    out_from_args,
    profile_from_args,
    script_main,
)
from ._validate import CellField, check_result

__all__ = [
    "Experiment",
    "CellField",
    "check_result",
    "SweepResult",
    "SweepInterrupted",
    "run_sweep",
    "pending_cells",
    "script_main",
    "cache_key",
    "canonical_json",
    "cell_path",
    "dask_client",
    "discover_experiments",
    "load_experiments",
    "select_experiments",
    "add_run_arguments",
    "profile_from_args",
    "out_from_args",
    "describe_result",
    "CONNECT_TIMEOUT_S",
]
