"""lbtheory: load balancing under delayed feedback.

Equilibria, price of anarchy, delayed fluid models, stepsize verification, BalanceRoute.

See README.md for a tour and ``../shared/THEORY.md`` (copied as docs/THEORY.md) for the mathematics.
"""

from __future__ import annotations

__version__ = "0.1.0"
