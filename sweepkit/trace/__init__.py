"""The speculative-decoding mechanism, pass by pass (``sweepkit trace``): a scheduler over the cost model."""

from sweepkit.trace.scheduler import Scenario, accepted_drafts, run_mode, summary

__all__ = ["Scenario", "accepted_drafts", "run_mode", "summary"]
