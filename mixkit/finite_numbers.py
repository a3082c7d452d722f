"""One check for "a finite real number" on user values (HTTP JSON, CLI, Python API).

`math.isfinite` raises OverflowError on an int too large for a float (a 400-digit JSON integer), which turned into
500s and tracebacks wherever it guarded user input; every such check calls this instead, so such an int is refused
with the site's own ValueError like NaN or infinity."""

from __future__ import annotations

import math
import numbers
from typing import Any


def is_finite_number(value: Any) -> bool:
    """True for a real number (numpy's too, not a bool) that a float holds finitely; False for NaN, the infinities,
    an int past float's range (on which math.isfinite raises OverflowError) and anything not a number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
