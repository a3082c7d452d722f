"""A1111 prompt editing (`[from:to:when]`) and alternation (`[a|b]`): a prompt becomes a step schedule.

Behaviour follows AUTOMATIC1111 v1.10 `get_learned_conditioning_prompt_schedules` (its lark grammar,
its hires-fix offsets and its "use old scheduling" option). A1111 parses with an Earley parser; this module is a hand-written
parser for the same language:

    start     := (prompt | stray)*             stray = one of  [ ] ( ) :   (top level only)
    prompt    := (emphasis | scheduled | alternate | plain | whitespace)*
    emphasis  := "(" prompt ")" | "(" prompt ":" prompt ")" | "[" prompt "]"
    scheduled := "[" [prompt ":"] prompt ":" ws? NUMBER ws? "]"
    alternate := "[" prompt ("|" prompt?)+ "]"
    plain     := (any char except \\ [ ] ( ) : |  |  "\\" + any char except newline)+

A bracket that cannot be parsed is literal text at the top level; a `|` outside an alternation or a
trailing backslash makes the whole prompt literal (no editing at all), exactly as in A1111. Emphasis
brackets are kept verbatim in the output: they are parsed later by `parse_prompt_attention`.
Recursion depth is bounded by `limits.MAX_BRACKET_DEPTH`, checked before parsing.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from mixkit.prompts.limits import check_prompt_text

# lark's common.SIGNED_NUMBER: optional sign, int or decimal, optional exponent.
_NUMBER_FIELD = re.compile(r"\s*([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*")
_DELIMITERS = "[]():|\\"


@dataclass(frozen=True)
class Scheduled:
    """`[before:after:when]`; `before` is None for the two-part form `[after:when]`."""

    before: tuple | None
    after: tuple
    when: str  # the NUMBER as written: a "." makes it a fraction of the steps


@dataclass(frozen=True)
class Alternate:
    """`[a|b|c]`: option (step - 1) % len(options) is active at each step."""

    options: tuple


class _Failed(Exception):
    """The whole prompt is outside the grammar; A1111 then uses it verbatim for every step."""


class _ScheduleParser:
    """Parses one prompt into a tuple of nodes (str | Scheduled | Alternate)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.memo: dict[int, tuple[tuple, int] | None] = {}

    def parse(self) -> tuple:
        text, pos, nodes = self.text, 0, []
        while pos < len(text):
            char = text[pos]
            if char in "([":
                parsed = self.construct(pos)
                if parsed is not None and not self.read_as_strays(parsed):
                    nodes.extend(parsed[0])
                    pos = parsed[1]
                    continue
                nodes.append(char)  # stray opener
                pos += 1
            elif char in ")]:":
                nodes.append(char)  # stray closer or colon
                pos += 1
            else:
                run, pos = self.plain(pos)
                if not run:
                    raise _Failed  # "|" at the top level, or a backslash with nothing to escape
                nodes.append(run)
        return _merge_text(nodes)

    def read_as_strays(self, parsed: tuple[tuple, int]) -> bool:
        """Whether A1111 would read this top-level construct as literal stray characters instead.

        A1111's Earley parser, when both readings are valid, reads a bracket construct that is
        directly followed by an even, non-zero number of stray characters ("[a:3]((", "[a:3]):")
        as literal text; with an odd number it keeps the construct. It is an artefact of lark's
        ambiguity resolution, measured by fuzzing against A1111's grammar. An alternation is never
        read that way: its "|" would then be at the top level, which is invalid.
        """
        nodes, pos = parsed
        if isinstance(nodes[0], Alternate):
            return False
        count = 0
        while pos < len(self.text):
            char = self.text[pos]
            if not (char in ")]:" or (char in "([" and self.construct(pos) is None)):
                break
            count += 1
            pos += 1
        return count > 0 and count % 2 == 0

    def plain(self, pos: int) -> tuple[str, int]:
        """The longest run of plain text (with escapes) starting at `pos`; may be empty."""
        text, start = self.text, pos
        while pos < len(text):
            char = text[pos]
            if char == "\\":
                if pos + 1 >= len(text) or text[pos + 1] == "\n":
                    break
                pos += 2
            elif char in _DELIMITERS:
                break
            else:
                pos += 1
        return text[start:pos], pos

    def prompt(self, pos: int) -> tuple[tuple, int] | None:
        """A `prompt`: stops before ":", "|", ")", "]" or the end; None if a nested bracket fails."""
        text, nodes = self.text, []
        while pos < len(text):
            char = text[pos]
            if char in "([":
                parsed = self.construct(pos)
                if parsed is None:
                    return None
                nodes.extend(parsed[0])
                pos = parsed[1]
            elif char in ")]:|":
                break
            else:
                run, pos = self.plain(pos)
                if not run:
                    return None  # lone backslash: no rule can consume it
                nodes.append(run)
        return tuple(nodes), pos

    def construct(self, pos: int) -> tuple[tuple, int] | None:
        """A bracketed emphasis, edit or alternation starting at `pos`, as (nodes, end), or None."""
        if pos not in self.memo:
            self.memo[pos] = self._construct(pos)
        return self.memo[pos]

    def _construct(self, pos: int) -> tuple[tuple, int] | None:
        text, opener = self.text, self.text[pos]
        closer = ")" if opener == "(" else "]"
        segments: list[tuple] = []
        separators: list[str] = []
        cursor = pos + 1
        while True:
            parsed = self.prompt(cursor)
            if parsed is None:
                return None
            segments.append(parsed[0])
            cursor = parsed[1]
            if cursor >= len(text):
                return None
            char = text[cursor]
            if char == closer:
                break
            if char not in ":|":
                return None  # the other kind of closer
            separators.append(char)
            cursor += 1
        end = cursor + 1

        if opener == "(":
            if separators in ([], [":"]):
                return _emphasis(opener, segments, separators, closer), end
            return None
        if not separators:
            return _emphasis(opener, segments, separators, closer), end
        if all(sep == "|" for sep in separators):
            return (Alternate(tuple(segments)),), end
        if all(sep == ":" for sep in separators) and len(separators) <= 2:
            number = _number_field(segments[-1])
            if number is None:
                return None
            before = segments[0] if len(separators) == 2 else None
            return (Scheduled(before, segments[-2], number),), end
        return None


def _emphasis(opener: str, segments: list[tuple], separators: list[str], closer: str) -> tuple:
    nodes: list = [opener]
    for index, segment in enumerate(segments):
        if index:
            nodes.append(separators[index - 1])
        nodes.extend(segment)
    nodes.append(closer)
    return tuple(nodes)


def _number_field(segment: tuple) -> str | None:
    """The NUMBER of a `[...:when]` field if the segment is only whitespace and a number."""
    if len(segment) != 1 or not isinstance(segment[0], str):
        return None
    match = _NUMBER_FIELD.fullmatch(segment[0])
    return match.group(1) if match else None


def _merge_text(nodes: list) -> tuple:
    merged: list = []
    for node in nodes:
        if isinstance(node, str) and merged and isinstance(merged[-1], str):
            merged[-1] += node
        else:
            merged.append(node)
    return tuple(merged)


def parse_schedule_tree(text: str) -> tuple:
    """Parse a prompt into nodes (str, Scheduled, Alternate); a prompt outside the grammar is one str."""
    check_prompt_text(text)
    try:
        return _ScheduleParser(text).parse()
    except _Failed:
        return (text,) if text else ()


@dataclass(frozen=True)
class StepCounting:
    """How `[from:to:when]` numbers become step numbers in one pass (A1111's `int_offset` / `flt_offset`).

    First pass (or no hires fix): `steps` are the pass's steps and nothing is subtracted. Hires pass: `steps` are
    the hires steps, an integer `when` has the first pass's steps subtracted and a fraction has 1.0 subtracted, so
    `[a:b:0.5]` (switched during the first pass) is `b` throughout and `[a:b:1.5]` switches half-way through the
    hires pass. `old` is A1111's "use old scheduling": values below 1 are fractions, others step numbers, no
    offsets.
    """

    steps: int
    int_offset: int = 0
    fraction_offset: float = 0.0
    old: bool = False

    @classmethod
    def of(cls, base_steps: int, hires_steps: int | None = None, use_old_scheduling: bool = False) -> "StepCounting":
        """A1111's reading of (base_steps, hires_steps, use_old_scheduling)."""
        if hires_steps is None or use_old_scheduling:
            return cls(base_steps, old=use_old_scheduling)
        return cls(hires_steps, int_offset=base_steps, fraction_offset=1.0)


def edit_step(when: str, counting: StepCounting | int) -> int:
    """The last step (1-based) that still shows `before`: "0.25" is a fraction of the steps, "3" a step number.

    Like A1111, a number containing "." is a fraction even when it is >= 1 (`[a:b:1.0]` never
    switches in a first pass), and the step is truncated towards zero and capped at the steps. Infinite
    values (a 1e400 literal) clamp to the ends instead of raising OverflowError as A1111 does. An int
    `counting` is the steps of a pass without offsets.
    """
    if isinstance(counting, int):
        counting = StepCounting(counting)
    steps = counting.steps
    value = float(when)
    if counting.old:
        value = value * steps if value < 1 else value
    elif "." in when:
        value = (value - counting.fraction_offset) * steps
    else:
        value = value - counting.int_offset
    if math.isinf(value):
        return steps if value > 0 else -1
    return min(steps, int(value))


def _collect_steps(nodes: tuple, counting: StepCounting, found: set[int]) -> None:
    for node in nodes:
        if isinstance(node, Scheduled):
            step = edit_step(node.when, counting)
            if step >= 1:
                found.add(step)
            if node.before is not None:
                _collect_steps(node.before, counting, found)
            _collect_steps(node.after, counting, found)
        elif isinstance(node, Alternate):
            found.update(range(1, counting.steps + 1))
            for option in node.options:
                _collect_steps(option, counting, found)


def _render(nodes: tuple, step: int, counting: StepCounting, out: list[str]) -> None:
    for node in nodes:
        if isinstance(node, str):
            out.append(node)
        elif isinstance(node, Scheduled):
            if step <= edit_step(node.when, counting):
                _render(node.before or (), step, counting, out)
            else:
                _render(node.after, step, counting, out)
        else:
            _render(node.options[(step - 1) % len(node.options)], step, counting, out)


def prompt_schedule(text: str, counting: StepCounting | int) -> list[list]:
    """[[end_step, text], ...] for one prompt: `text` is used up to and including `end_step`."""
    if isinstance(counting, int):
        counting = StepCounting(counting)
    tree = parse_schedule_tree(text)
    found = {counting.steps}
    _collect_steps(tree, counting, found)
    schedule = []
    for end in sorted(found):
        out: list[str] = []
        _render(tree, end, counting, out)
        schedule.append([end, "".join(out)])
    return schedule


def _check_steps(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def get_learned_conditioning_prompt_schedules(prompts: list[str], base_steps: int, hires_steps: int | None = None,
                                              use_old_scheduling: bool = False) -> list[list[list]]:
    """A1111's schedule of each prompt: a list of [end_at_step, text] pairs, last end == the pass's steps.

    With `hires_steps` the schedules are those of the hires-fix pass (A1111's signature and offsets, see
    `StepCounting`): they count in `hires_steps`, after a first pass of `base_steps`.

    >>> get_learned_conditioning_prompt_schedules(["a [b:3]"], 10)
    [[[3, 'a '], [10, 'a b']]]
    >>> get_learned_conditioning_prompt_schedules(["a [b:1.5] c"], 10, 10)
    [[[5, 'a  c'], [10, 'a b c']]]
    """
    if isinstance(prompts, str) or not isinstance(prompts, (list, tuple)):
        raise TypeError(f"prompts must be a list of str, got {type(prompts).__name__}")
    _check_steps("base_steps", base_steps)
    if hires_steps is not None:
        _check_steps("hires_steps", hires_steps)
    if not isinstance(use_old_scheduling, bool):
        raise TypeError(f"use_old_scheduling must be True or False, got {use_old_scheduling!r}")
    counting = StepCounting.of(base_steps, hires_steps, use_old_scheduling)
    cache: dict[str, list[list]] = {}
    for prompt in prompts:
        if prompt not in cache:
            cache[prompt] = prompt_schedule(prompt, counting)
    return [[list(entry) for entry in cache[prompt]] for prompt in prompts]
