"""Numbers for people: SI prefixes for energy and cost, minutes and hours for time.

A trace-backed job's trial costs millions of joules and hours of GPU time; the example's costs
a few hundred joules and seconds. One formatter for both keeps tables short and units explicit.
Cost is in joules: eta * energy + (1 - eta) * max power * GPUs * time (zeus_kfp.job.zeus_cost).
"""

from __future__ import annotations

import math

COST_UNIT = "J"  # joules: the cost is an energy, time priced at max power


def si(value: float | None, unit: str, digits: int = 3) -> str:
    """1234567 J -> '1.23 MJ'; None or NaN -> '-'."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    magnitude = abs(value)
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if magnitude >= factor:
            return f"{value / factor:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}"


def duration(seconds: float | None) -> str:
    """Seconds as s, min or h with three significant digits; None or NaN -> '-'."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "-"
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 60:
        return f"{seconds / 60:.3g} min"
    return f"{seconds:.3g} s"
