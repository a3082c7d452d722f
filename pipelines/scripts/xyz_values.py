"""The value syntax of an X/Y/Z plot axis, as A1111's `process_axis` reads it.

Values are comma separated, CSV style (`"a, b", c` is two values; spaces after a comma are skipped, so a quote may
follow one). A numeric axis also takes ranges:

- `1-5` is 1, 2, 3, 4, 5 and `1-5 (+2)` is 1, 3, 5 (a step; `10-1 (-3)` counts down: 10, 7, 4, 1);
- `10-20 [3]` is 3 values spread evenly from 10 to 20 (10, 15, 20; whole-number axes truncate, as A1111's
  `int(x)` of `np.linspace`);
- floats the same way: `0.5-1.5 (+0.5)` is 0.5, 1.0, 1.5; `1-2 [5]` is 1, 1.25, 1.5, 1.75, 2.

Where this differs from A1111, it is on purpose: a range's end is included for a negative step too (A1111 adds 1 to
the end whatever the step's sign, so its `5-1 (-1)` stops at 3); float ranges are computed as start + i * step and
rounded to 10 decimals (A1111's `np.arange` may add a value past the end, or give 0.30000000000000004); the float
pattern's dot is a dot (A1111's matches any character); a step of 0 or a count below 1 is refused instead of
looping or giving nothing.
"""

from __future__ import annotations

import csv
import math
import re
from io import StringIO

_INT = r"[+-]?\s*\d+"
_FLOAT = r"[+-]?\s*(?:\d+(?:\.\d*)?|\.\d+)"
INT_STEP_RANGE = re.compile(rf"\s*({_INT})\s*-\s*({_INT})(?:\s*\(\s*([+-]?\s*\d+)\s*\))?\s*")
INT_COUNT_RANGE = re.compile(rf"\s*({_INT})\s*-\s*({_INT})\s*\[\s*(\d+)\s*]\s*")
FLOAT_STEP_RANGE = re.compile(rf"\s*({_FLOAT})\s*-\s*({_FLOAT})(?:\s*\(\s*({_FLOAT})\s*\))?\s*")
FLOAT_COUNT_RANGE = re.compile(rf"\s*({_FLOAT})\s*-\s*({_FLOAT})\s*\[\s*(\d+)\s*]\s*")
RANGE_HELP = "a number, or a range such as 1-5, 1-5 (+2) or 10-20 [5]"
# A range is expanded before the plot's size is checked: a bound here keeps `1-999999999` from filling memory first.
# It bounds an axis's values in all, not each range: 2,000 copies of `1-10000` in one request are 20 million values.
MAX_RANGE_VALUES = 10_000


def split_values(text: str) -> list[str]:
    """The comma-separated values of `text`, CSV quoting honoured, each stripped; empty ones dropped."""
    if not isinstance(text, str):
        raise TypeError(f"axis values must be a string of comma-separated values, got {type(text).__name__}.")
    rows = csv.reader(StringIO(text), skipinitialspace=True)
    try:
        return [value.strip() for row in rows for value in row if value.strip()]
    except csv.Error as error:  # a value over csv's 131,072-character field limit: not a ValueError of its own
        raise ValueError(f"axis values could not be read as comma-separated values ({error}); give shorter "
                         "values.") from None


def join_values(values: list) -> str:
    """Values as one CSV line (quoted where they hold a comma): the inverse of `split_values`, for "fill values"."""
    out = StringIO()
    csv.writer(out).writerow([str(value) for value in values])
    return out.getvalue().strip()


def _number(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _checked_count(label: str, value: str, count: int) -> int:
    if count < 1 or count > MAX_RANGE_VALUES:
        raise ValueError(f"{label} value {value!r}: the count in [...] must be 1 to {MAX_RANGE_VALUES}, got {count}.")
    return count


def _checked_steps(label: str, value: str, count: int) -> int:
    if count > MAX_RANGE_VALUES:
        raise ValueError(f"{label} value {value!r} makes {count} values, more than {MAX_RANGE_VALUES}; use a bigger "
                         "step in (...) or a count in [...].")
    return count


def _checked_total(label: str, values: list, adding: int) -> None:
    """Refuses before expanding a range that would take the axis past MAX_RANGE_VALUES values in all."""
    if len(values) + adding > MAX_RANGE_VALUES:
        raise ValueError(f"{label}: the values make more than {MAX_RANGE_VALUES} in all; give fewer values or "
                         "ranges.")


def _finite(label: str, value: str, *numbers: float) -> None:
    if not all(math.isfinite(number) for number in numbers):
        raise ValueError(f"{label} takes finite numbers, got {value!r}.")


def _linspace(start: float, end: float, count: int) -> list[float]:
    if count == 1:
        return [start]
    return [start + (end - start) * i / (count - 1) for i in range(count)]


def int_values(label: str, items: list[str]) -> list[int]:
    """Whole numbers and whole-number ranges; ValueError naming the axis and the value that is neither."""
    values: list[int] = []
    for item in items:
        if (match := INT_STEP_RANGE.fullmatch(item)) is not None:
            start, end = int(_number(match.group(1))), int(_number(match.group(2)))
            step = int(_number(match.group(3))) if match.group(3) else 1
            if step == 0:
                raise ValueError(f"{label} value {item!r}: the step in (...) must not be 0.")
            count = max(0, (end - start) // step + 1)  # not len(range(...)): an OverflowError past sys.maxsize
            _checked_total(label, values, _checked_steps(label, item, count))
            values.extend(range(start, end + (1 if step > 0 else -1), step))
        elif (match := INT_COUNT_RANGE.fullmatch(item)) is not None:
            start, end = int(_number(match.group(1))), int(_number(match.group(2)))
            count = _checked_count(label, item, int(match.group(3)))
            _checked_total(label, values, count)
            values.extend(int(value) for value in _linspace(start, end, count))
        else:
            try:
                value = int(_number(item))
            except ValueError:
                raise ValueError(f"{label} takes whole numbers: {item!r} is not {RANGE_HELP}.") from None
            _checked_total(label, values, 1)
            values.append(value)
    return values


def float_values(label: str, items: list[str]) -> list[float]:
    """Numbers and number ranges; ValueError naming the axis and the value that is neither."""
    values: list[float] = []
    for item in items:
        if (match := FLOAT_STEP_RANGE.fullmatch(item)) is not None and not _plain_number(item):
            start, end = float(_number(match.group(1))), float(_number(match.group(2)))
            step = float(_number(match.group(3))) if match.group(3) else 1.0
            # 400 digits read as inf: the count below would be inf (OverflowError), not a clear refusal
            _finite(label, item, start, end, step, (end - start) / step if step else 0.0)
            if step == 0:
                raise ValueError(f"{label} value {item!r}: the step in (...) must not be 0.")
            count = math.floor((end - start) / step + 1e-9) + 1
            if count > 0:
                _checked_total(label, values, _checked_steps(label, item, count))
                values.extend(round(start + i * step, 10) for i in range(count))
        elif (match := FLOAT_COUNT_RANGE.fullmatch(item)) is not None:
            start, end = float(_number(match.group(1))), float(_number(match.group(2)))
            _finite(label, item, start, end, end - start)
            count = _checked_count(label, item, int(match.group(3)))
            _checked_total(label, values, count)
            values.extend(round(value, 10) for value in _linspace(start, end, count))
        else:
            try:
                value = float(_number(item))
            except ValueError:
                raise ValueError(f"{label} takes numbers: {item!r} is not {RANGE_HELP}.") from None
            _finite(label, item, value)
            _checked_total(label, values, 1)
            values.append(value)
    return values


def _plain_number(item: str) -> bool:
    """`-1.5` is a number, not a range (the range pattern needs two numbers, but `1e-5` would look like one)."""
    try:
        float(_number(item))
    except ValueError:
        return False
    return True
