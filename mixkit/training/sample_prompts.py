"""Sample-image prompts in kohya's syntax: "a dog --n blurry --w 512 --h 768 --s 28 --l 7.5 --d 42".

kohya's trainers read their --sample_prompts lines with `line_to_prompt_dict` (library/train_util.py): the
text before the first " --" is the prompt, and each " --x value" after it sets one option of that image.
People keep one prompts file for all their runs, so the options must act here too instead of reaching the
text encoder as words. Unlike kohya, which skips what it cannot parse without a word, an option mixkit does
not know (or cannot honour, like another sampler) is refused, naming the line and the options it knows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SamplePrompt:
    """One sample image's settings; None means "the run's": its resolution, validation_steps,
    validation_guidance_scale, and validation_seed + the prompt's index."""

    prompt: str
    negative_prompt: str = ""
    width: int | None = None
    height: int | None = None
    steps: int | None = None
    guidance_scale: float | None = None
    seed: int | None = None


# kohya's option letters, what each sets here, and the pattern of its value.
SAMPLE_PROMPT_OPTIONS = {
    "n": ("negative_prompt", r"(.*)"),
    "w": ("width", r"(\d+)"),
    "h": ("height", r"(\d+)"),
    "s": ("steps", r"(\d+)"),
    "l": ("guidance_scale", r"(\d+(?:\.\d*)?|\.\d+)"),
    "d": ("seed", r"(\d+)"),
    "ss": ("sampler", r"(\S+)"),
}
# The validation images are drawn with mixkit's own deterministic DDIM (`validation_images`), so kohya's
# `--ss ddim` is the one sampler choice that can be honoured.
VALIDATION_SAMPLER = "ddim"


def _option_error(source: str, line: str, message: str) -> ValueError:
    known = ", ".join(f"--{key} ({field})" for key, (field, _) in SAMPLE_PROMPT_OPTIONS.items())
    return ValueError(f"{source}: sample prompt {line!r}: {message}; kohya's options known here: {known}")


def parse_sample_prompt(line: str, source: str = "sample prompt") -> SamplePrompt:
    """The `SamplePrompt` of one line in kohya's syntax; `source` (a setting or "file, line n") names it in errors."""
    prompt, *options = line.split(" --")
    values: dict = {"prompt": prompt.strip()}
    for option in options:
        if not option.strip():
            continue
        key, _, value = option.strip().partition(" ")
        if key not in SAMPLE_PROMPT_OPTIONS:
            raise _option_error(source, line, f"unknown option --{key}")
        field, pattern = SAMPLE_PROMPT_OPTIONS[key]
        match = re.fullmatch(pattern, value.strip())
        if match is None:
            raise _option_error(source, line, f"--{key} needs a value like {'7.5' if key == 'l' else '512'}, "
                                              f"got {value.strip()!r}")
        values[field] = match.group(1)
    sampler = values.pop("sampler", VALIDATION_SAMPLER).lower()
    if sampler != VALIDATION_SAMPLER:
        raise _option_error(source, line, f"--ss {sampler}: sample images are drawn with DDIM only; write --ss ddim "
                                          "or leave --ss out")
    for field in ("width", "height", "steps", "seed"):
        if field in values:
            values[field] = int(values[field])
    if "guidance_scale" in values:
        values["guidance_scale"] = float(values["guidance_scale"])
    sample = SamplePrompt(**values)
    _check_sample(sample, source, line)
    return sample


def _check_sample(sample: SamplePrompt, source: str, line: str) -> None:
    """Refuse values the sampler cannot draw (kohya rounds sizes down to a multiple of 64 and clamps steps to
    1..1000 without a word; a changed size would be silently another image)."""
    for name in ("width", "height"):
        value = getattr(sample, name)
        if value is not None and (value < 8 or value % 8):
            raise _option_error(source, line, f"{name} {value} must be a positive multiple of 8 (the VAE's factor); "
                                              f"try {max(8, value // 8 * 8)}")
    if sample.steps is not None and not 1 <= sample.steps <= 1000:
        raise _option_error(source, line, f"--s {sample.steps}: steps must be in 1..1000")
    if sample.guidance_scale is not None and not 1.0 <= sample.guidance_scale <= 100.0:
        raise _option_error(source, line, f"--l {sample.guidance_scale}: the guidance scale must be in 1..100 "
                                          "(1 = no guidance)")


def read_sample_prompts_file(path: str | Path) -> list[SamplePrompt]:
    """The prompts of a kohya --sample_prompts text file: one a line, blank lines and "#" comments skipped."""
    path = Path(path).expanduser()
    if path.suffix.lower() in (".toml", ".json"):
        raise ValueError(f"sample_prompts {str(path)!r}: only kohya's .txt form (one prompt a line, options as "
                         "'--n ... --w 512') is read; write the prompts one a line into a .txt file, or list them "
                         "in validation_prompts")
    if not path.is_file():
        raise FileNotFoundError(f"sample_prompts {str(path)!r} is not a file; name a text file with one prompt a line")
    prompts = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip() and not line.lstrip().startswith("#"):
            prompts.append(parse_sample_prompt(line.strip(), source=f"{path}, line {number}"))
    return prompts
