"""The lines of A1111's "Prompts from file or textbox": a plain line is a prompt, a line starting with `--` sets
fields the way A1111's `cmdargs` reads it (`--prompt "a cat" --steps 20 --negative_prompt blurry, low quality`).

The options are A1111's (scripts/prompts_from_file.py `prompt_tags`), with its types: `--prompt` and
`--negative_prompt` take every word up to the next `--option`; the others one (shell-quoted) value. Where A1111 logs
a line it cannot read and generates it as a plain prompt, mixkit refuses the whole list before generating, naming the
line, the option and what it takes: a typo in option 30 of a batch should not cost 29 unwanted images.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any, Callable


def _whole_number(text: str) -> int:
    return int(text)


def _boolean(text: str) -> bool:
    """A1111 reads "true" as True and any other word as False; mixkit takes true/false in any case and refuses the rest,
    so "yes" or "1" is not silently off."""
    if text.lower() not in ("true", "false"):
        raise ValueError
    return text.lower() == "true"


# A1111's option -> (what it takes, the params field it sets; None: not a params field: read and checked, and
# --sd_model run by the script, the others without effect in mixkit)
OPTIONS: dict[str, tuple[str, Callable[[str], Any], str | None]] = {
    "sd_model": ("a checkpoint name", str, None),
    "outpath_samples": ("a folder", str, None),
    "outpath_grids": ("a folder", str, None),
    "prompt_for_display": ("text", str, None),
    "prompt": ("text", str, "prompt"),
    "negative_prompt": ("text", str, "negative_prompt"),
    "styles": ("style names, comma-separated", str, "styles"),
    "seed": ("a whole number", _whole_number, "seed"),
    "subseed_strength": ("a number", float, "subseed_strength"),
    "subseed": ("a whole number", _whole_number, "subseed"),
    "seed_resize_from_h": ("a whole number", _whole_number, "seed_resize_from_h"),
    "seed_resize_from_w": ("a whole number", _whole_number, "seed_resize_from_w"),
    "sampler_index": ("a whole number", _whole_number, None),
    "sampler_name": ("a sampler name", str, "sampler"),
    "batch_size": ("a whole number", _whole_number, "batch_size"),
    "n_iter": ("a whole number", _whole_number, "batch_count"),
    "steps": ("a whole number", _whole_number, "steps"),
    "cfg_scale": ("a number", float, "cfg_scale"),
    "width": ("a whole number", _whole_number, "width"),
    "height": ("a whole number", _whole_number, "height"),
    "restore_faces": ("true or false", _boolean, "restore_faces"),
    "tiling": ("true or false", _boolean, "tiling"),
    "do_not_save_samples": ("true or false", _boolean, None),
    "do_not_save_grid": ("true or false", _boolean, None),
}
TEXT_OPTIONS = ("prompt", "negative_prompt")  # these take every word up to the next --option
# Read by A1111, refused here: a prompt list (from an HTTP client too) must not choose folders on the machine.
# (--sd_model is read here and run by `pipelines.scripts.prompt_line_checkpoints`.)
REFUSED = {
    "outpath_samples": "images are saved into the output folder the caller chose; a prompt list cannot pick folders",
    "outpath_grids": "grids are saved into the output folder the caller chose; a prompt list cannot pick folders",
}


@dataclass(frozen=True)
class PromptLine:
    """One job: its 1-based line number in the text, and A1111's options it sets (a plain line: {"prompt": line})."""

    number: int
    options: dict = field(default_factory=dict)

    def get(self, name: str, default: Any = None) -> Any:
        return self.options.get(name, default)


def parse_prompt_lines(text: str) -> tuple[PromptLine, ...]:
    """Each non-blank line of `text` (stripped) as a job; ValueError naming the line for an option it cannot read."""
    if not isinstance(text, str):
        raise ValueError(f"the list of prompt inputs must be text, got {type(text).__name__}.")
    jobs = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        # A1111 tries any line holding "--" as options and, failing, takes it as a prompt: a line that does not start
        # with an option always ends up a prompt there, so only lines starting with "--" are read as options here.
        options = parse_option_line(line, number) if line.startswith("--") else {"prompt": line}
        jobs.append(PromptLine(number, options))
    return tuple(jobs)


def parse_option_line(line: str, number: int = 1) -> dict[str, Any]:
    """A1111's `cmdargs` for one line, with its options' types; ValueError "line N: ..." for what it cannot read."""
    try:
        words = shlex.split(line)
    except ValueError as error:
        raise ValueError(f"line {number}: cannot split {line!r:.80} into options ({error}); close its "
                         "quotes.") from None
    options: dict[str, Any] = {}
    position = 0
    while position < len(words):
        word = words[position]
        if not word.startswith("--"):
            raise ValueError(f"line {number}: expected an option such as --steps, got {word!r}.")
        name = word[2:]
        if name not in OPTIONS:
            raise ValueError(f"line {number}: unknown option {word}; the options are "
                             f"{', '.join('--' + option for option in OPTIONS)}.")
        if position + 1 >= len(words):
            raise ValueError(f"line {number}: option {word} needs a value ({OPTIONS[name][0]}).")
        if name in REFUSED:
            raise ValueError(f"line {number}: option {word} is not supported: {REFUSED[name]}.")
        if name in TEXT_OPTIONS:
            end = position + 2
            while end < len(words) and not words[end].startswith("--"):
                end += 1
            options[name] = " ".join(words[position + 1:end])
            position = end
            continue
        takes, convert, _ = OPTIONS[name]
        try:
            options[name] = convert(words[position + 1])
        except ValueError:
            raise ValueError(f"line {number}: option {word} takes {takes}, got {words[position + 1]!r}.") from None
        position += 2
    return options
