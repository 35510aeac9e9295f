"""Checked scalar inputs shared by ``evaluate``, the sweep engine and the mechanism trace.

Each check returns the value in its canonical type or raises :class:`~sweepkit.errors.InputError` with one
line naming the field, the bad value and what is allowed.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from sweepkit.errors import bad_value


def check_int(name: str, value: Any, minimum: int, maximum: int | None = None) -> int:
    """An integer (or integer-valued number) in [minimum, maximum], else a clear InputError.

    Args:
      name: the field's name, for the message.  value: the given value.  minimum, maximum: inclusive bounds.

    Returns:
      ``int(value)``.

    Example:
      >>> check_int("batch", 4.0, 1), check_int("gamma", 0, 0, 64)
      (4, 0)
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) \
        and float(value).is_integer() and value >= minimum and (maximum is None or value <= maximum)
    if not ok:
        allowed = f"an integer >= {minimum}" if maximum is None else f"an integer in [{minimum}, {maximum:,}]"
        raise bad_value(name, value, allowed)
    return int(value)


def check_tp(tp: int, model) -> int:
    """A TP degree must divide the model's attention heads (each device holds whole heads).

    Megatron-LM splits attention by heads (Shoeybi et al. 2019, arXiv 1909.08053, sec. 3), so tp | n_heads.

    Returns:
      ``tp`` unchanged.
    """
    if model.n_heads % tp:
        divisors = [d for d in range(1, model.n_heads + 1) if model.n_heads % d == 0]
        raise bad_value("tp", tp, f"a divisor of {model.name}'s {model.n_heads} attention heads "
                        f"({', '.join(map(str, divisors))})")
    return tp


def check_alpha(value: Any, name: str = "alpha") -> float:
    """An acceptance probability: a finite number in [0, 1] (Leviathan et al. 2023, arXiv 2211.17192, sec. 3.1).

    Example:
      >>> check_alpha(0.7), check_alpha(1)
      (0.7, 1.0)
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) \
        and 0.0 <= value <= 1.0
    if not ok:
        raise bad_value(name, value, "a number in [0, 1]")
    return float(value)


def gamma_bucket(gamma: int) -> int:
    """Static draft-loop length: the next power of two >= gamma (limits recompiles), 2^ceil(log2 max(gamma, 1)).

    Example:
      >>> [gamma_bucket(g) for g in (0, 1, 3, 4, 5)]
      [1, 1, 4, 4, 8]
    """
    return 1 << max(0, (max(gamma, 1) - 1).bit_length())
