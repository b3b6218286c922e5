"""The instance batcher's admission orders (:class:`Admission`): which waiting request an
iteration tries first, for both instance engines (the reference sorts with
:func:`admission_key`; the compiled engine keeps each waiting queue in that order)."""

from __future__ import annotations

import enum

__all__ = ["Admission", "admission_key", "ADMISSION_CODES"]


class Admission(enum.StrEnum):
    """The instance batcher's admission order (the waiting queue's order; preempted requests
    always resume first, most recently preempted at the front, as vLLM's RECOMPUTE puts them).

    The paper (Knowl 6) names bin packing and least work left without defining them; the two
    definitions here are ours [R], fixed before any Knowl 6 run:

    * ``lwl`` — least work left: fresh requests in increasing order of their predicted output
      tokens (the work a request has left is the decode iterations it still needs — each costs
      a whole batch iteration, where a prompt token costs a thousandth of one; the router's
      predicted output, since true lengths are unknown at arrival), ties by prompt, then id.
      Admission stops at the first request that does not fit, as FCFS does.
    * ``bin-packing`` — first-fit decreasing: fresh requests in decreasing order of their
      predicted footprint, prompt + predicted output tokens (the KV a request holds when it
      finishes), ties by id; admission tries every waiting request in that order and admits each
      that fits the iteration's free blocks, batch slots and prefill-token budget, *skipping*
      the ones that do not (FCFS, SPF and LWL stop at the first), so the iteration's budget is
      filled as far as the queue allows. Chunked prefill, where the token budget splits a
      prompt, skips only on blocks.
    """

    #: first come, first served (vLLM's default).
    FCFS = "fcfs"
    #: shortest prompt first (preempted requests still resume first).
    SPF = "spf"
    #: least work left: fewest predicted output tokens first [R].
    LWL = "lwl"
    #: first-fit decreasing by predicted footprint, skipping what does not fit [R].
    BIN_PACKING = "bin-packing"


def admission_key(admission: Admission, prompt: int, pred: int, v: int) -> tuple[int, ...]:
    """The sort key of a fresh waiting request ``v`` (``prompt`` and predicted output tokens)
    under ``admission`` (smallest first; FCFS: dispatch order, ``(0,)``)."""
    if admission is Admission.SPF:
        return (prompt, v)
    if admission is Admission.LWL:
        return (pred, prompt, v)
    if admission is Admission.BIN_PACKING:
        return (-(prompt + pred), v)
    return (0,)


#: the compiled engine's code of each admission order (``gi[ADMISSION]`` of :mod:`._core`).
ADMISSION_CODES = {Admission.FCFS: 0, Admission.SPF: 1, Admission.LWL: 2,
                   Admission.BIN_PACKING: 3}
