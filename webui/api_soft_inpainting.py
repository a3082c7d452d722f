"""A1111's `alwayson_scripts: {"soft inpainting": {"args": [enabled, power, scale, detail, influence, threshold,
contrast]}}` read into `pipelines.soft_inpainting.SoftInpainting`, and the infotext's keys read back into those args.

A1111 fills the script's args from its UI defaults and lays the request's list over them, so a shorter list keeps the
defaults for the slots it leaves out; a longer one is refused here (A1111 would hand the extra values to the next
script). Each slot is checked against A1111's slider range, and a 422 names the slot, its label and the range.
"""

from __future__ import annotations

import numbers
from typing import Any

from pipelines.soft_inpainting import ENABLED_INFOTEXT_KEY, SOFT_INPAINTING_FIELDS, SoftInpainting

SOFT_INPAINTING_SCRIPT = "soft inpainting"  # A1111's title "Soft Inpainting", lower-cased as /scripts lists it


def _entry(scripts: dict | None) -> tuple[str, list] | None:
    for name, entry in (scripts or {}).items():
        if str(name).lower() == SOFT_INPAINTING_SCRIPT and isinstance(entry, dict):
            return str(name), entry.get("args", [])
    return None


def soft_inpainting_from_scripts(scripts: dict | None) -> SoftInpainting | None:
    """The request's Soft inpainting settings, None when it is absent or its `enabled` (args[0]) is false;
    raises ValueError naming the args slot that is not a number in A1111's range."""
    found = _entry(scripts)
    if found is None:
        return None
    name, args = found
    where = f"alwayson_scripts.{name!r}.args"
    if not isinstance(args, list):
        raise ValueError(f"{where} must be a list [enabled, schedule bias, ...], got {type(args).__name__}.")
    if not args or args[0] is False:
        return None
    if args[0] is not True:
        raise ValueError(f"{where}[0] (enabled) must be true or false, got {args[0]!r}.")
    if len(args) > 1 + len(SOFT_INPAINTING_FIELDS):
        raise ValueError(f"{where} has {len(args)} values; Soft inpainting takes {1 + len(SOFT_INPAINTING_FIELDS)}: "
                         "enabled, " + ", ".join(label for _, _, label, *_ in SOFT_INPAINTING_FIELDS) + ".")
    values = {}
    for slot, (value, (field, _, label, low, high, _)) in enumerate(zip(args[1:], SOFT_INPAINTING_FIELDS), start=1):
        # the range first: it refuses NaN and infinities, and math.isfinite raises OverflowError on a huge int
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not low <= value <= high:
            raise ValueError(f"{where}[{slot}] ({label}) must be a number in [{low:g}, {high:g}], got {value!r}.")
        values[field] = float(value)
    return SoftInpainting(**values)


def soft_inpainting_from_infotext(written: dict) -> SoftInpainting | None:
    """The settings an infotext records (`parse_infotext(..., defaults=False)`), None unless its
    "Soft inpainting enabled" is True; a missing setting takes A1111's default. Raises ValueError naming the key
    whose value is not a number."""
    if str(written.get(ENABLED_INFOTEXT_KEY, "")).strip() != "True":
        return None
    values = {}
    for field, key, *_ in SOFT_INPAINTING_FIELDS:
        if key in written:
            try:
                values[field] = float(str(written[key]).strip())
            except ValueError:
                raise ValueError(f"infotext: {key}: {written[key]!r} is not a number; fix the infotext or send "
                                 f"alwayson_scripts.{SOFT_INPAINTING_SCRIPT!r} in the request.") from None
    return SoftInpainting(**values)


def script_args(settings: SoftInpainting) -> list[Any]:
    """A1111's args list for `settings`: [True, power, scale, detail, influence, threshold, contrast]."""
    return [True, *(getattr(settings, field) for field, *_ in SOFT_INPAINTING_FIELDS)]


def with_infotext_soft_inpainting(scripts: dict | None, written: dict) -> dict | None:
    """`scripts` (a request's alwayson_scripts) with the infotext's Soft inpainting added, unless the request sends
    that script itself (its args win, as A1111 lays the request's args over the pasted ones); None when nothing
    is added."""
    settings = soft_inpainting_from_infotext(written)
    if settings is None or _entry(scripts) is not None:
        return None
    return {**(scripts or {}), SOFT_INPAINTING_SCRIPT: {"args": script_args(settings)}}
