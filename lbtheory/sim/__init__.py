"""DLB discrete-event cluster simulator: cells of servers, stale probes, routers, bursts, outages.

:func:`simulate` runs one router (from :mod:`lbtheory.routers`) on a :class:`Scenario`; pass the
same :class:`Arrivals` to compare policies on identical requests; :func:`appendix_b_scenario`
draws DLB's Appendix-B scenarios (THEORY §11.1); :func:`appendix_b_cell` runs one cell of the
Appendix-B experiments (every policy on the same arrivals, latency normalised by Rand's).
"""

from ._appendix_b import EVENT_WINDOW, appendix_b_scenario
from ._arrivals import Arrivals, arrivals_from_trace, generate_arrivals
from ._engine import simulate
from ._protocol import (
    DLB_POLICIES,
    WeightRecorder,
    appendix_b_cell,
    check_cell_config,
    trial_seed,
    weight_oscillation,
)
from ._result import SimResult
from ._scenario import (
    Burst,
    Estimation,
    Outage,
    Scenario,
    ServerSpec,
    TokenDist,
    load_scenario,
    scenario_from_dict,
)

__all__ = ["DLB_POLICIES", "simulate", "SimResult", "Scenario", "ServerSpec", "TokenDist", "Burst",
           "Outage",
           "load_scenario", "scenario_from_dict", "Arrivals", "generate_arrivals",
           "Estimation", "appendix_b_scenario", "arrivals_from_trace", "appendix_b_cell",
           "check_cell_config", "trial_seed", "weight_oscillation", "WeightRecorder",
           "EVENT_WINDOW"]
