"""Sweeps: grid specs (TOML) and the chunked jit/vmap engine.

``sweepkit.sweep.grid`` (light: no JAX) loads and validates grid files; ``sweepkit.sweep.engine`` evaluates
them. Only the grid API is re-exported here, so importing it does not start JAX.
"""

from sweepkit.sweep.grid import AXES, DEFAULTS, GridSpec, load_grid, parse_grid

__all__ = ["AXES", "DEFAULTS", "GridSpec", "load_grid", "parse_grid"]
