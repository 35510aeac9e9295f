"""Validation and calibration against measured systems.

Pipeline position: measurements (CSV) -> **cost model at each measured point** -> error table
(``validation`` in the warehouse) -> fitted device efficiencies (a devices TOML the catalogue loads).
"""

from sweepkit.validation.measurements import Measurement, load_measurements, parse_measurements
from sweepkit.validation.points import MODELLED, evaluate_points, status

__all__ = ["MODELLED", "Measurement", "evaluate_points", "load_measurements",
           "parse_measurements", "status"]
