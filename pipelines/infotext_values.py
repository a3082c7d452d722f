"""Infotext values as the types they stand for, strictly: a value that does not read raises ValueError.

`parse_infotext` returns every value as text; a paste (the HTTP API's `infotext` field, `mixkit generate
--infotext`) turns the ones it fills into numbers and flags, and names the key when one does not read.
"""

from __future__ import annotations

import math


def as_integer(text: object) -> int:
    """An integer, also as A1111 sometimes writes one ("20.0")."""
    value = str(text).strip()
    return int(float(value)) if value.endswith(".0") else int(value)


def as_number(text: object) -> float:
    """A finite number: "nan", "inf" and "1e400" (which float() reads as inf) are refused (ValueError), as no
    generation setting takes them and JSON cannot carry them back."""
    value = float(str(text).strip())
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def as_text(text: object) -> str:
    return str(text)


def as_flag(text: object) -> bool:
    """A1111's booleans are written "True" / "False"."""
    value = str(text).strip()
    if value not in ("True", "False"):
        raise ValueError(value)
    return value == "True"
