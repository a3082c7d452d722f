"""A1111 "infotext": the `parameters` text that records how an image was generated.

The layout is the one stable-diffusion-webui writes (`modules/processing.py: create_infotext`)
and reads (`modules/infotext_utils.py: parse_generation_parameters`), because that is what
Civitai, image browsers and every WebUI fork paste and display:

    <prompt, possibly several lines>
    Negative prompt: <negative prompt>          (only when there is one)
    Steps: 20, Sampler: DPM++ 2M, Schedule type: Karras, CFG scale: 7, Seed: 1234, Size: 512x768

This module is pure text processing: no image, file or model is touched here.
"""

from __future__ import annotations

import json
import math
import numbers
import re
from collections.abc import Mapping

from pipelines.infotext_defaults import apply_a1111_defaults

NEGATIVE_PROMPT_PREFIX = "Negative prompt:"

# A1111's `re_param`: a key starts with a word character and then holds word characters, spaces,
# "-" or "/"; a value is either a JSON string or everything up to the next comma.
PARAM_PATTERN = re.compile(r'\s*(\w[\w \-/]+):\s*("(?:\\.|[^\\"])+"|[^,]*)(?:,|$)')
IMAGE_SIZE_PATTERN = re.compile(r"^(\d+)x(\d+)$")
KEY_PATTERN = re.compile(r"\w[\w \-/]+")
# Where a failed PARAM_PATTERN attempt may resume (see `param_pairs`): past leading whitespace and a run of key characters.
KEY_RUN_PATTERN = re.compile(r"\s*\w[\w \-/]*")

# A1111 only treats the last line as the parameter line when it holds at least this many
# `Key: value` pairs; with fewer, the line is read back as part of the prompt.
MIN_PARAMS_FOR_PARAM_LINE = 3

InfotextValue = str | int | float | bool  # numpy integers and floats are accepted too


def quote_value(text: str) -> str:
    """Quote a parameter value the way A1111's `quote()` does, so A1111 reads it back.

    A1111 JSON-quotes (keeping non-ASCII characters as they are) exactly when the value holds a
    comma, a colon or a newline. We also quote two cases A1111 writes raw but then misreads:
    a value that starts and ends with `"` (A1111's reader would JSON-decode it) and a value with
    leading or trailing whitespace (the reader strips it). A quoted value is read back
    identically by A1111, so this never produces text A1111 parses differently.
    """
    needs_quotes = (
        "," in text
        or ":" in text
        or "\n" in text
        or (len(text) >= 2 and text[0] == '"' and text[-1] == '"')
        or text != text.strip()
    )
    return json.dumps(text, ensure_ascii=False) if needs_quotes else text


def unquote_value(text: str) -> str:
    """Undo `quote_value`: JSON-decode a value in double quotes, return others unchanged (as A1111)."""
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        return text
    try:
        decoded = json.loads(text)
    except ValueError:
        return text
    return decoded if isinstance(decoded, str) else text


def format_value(value: InfotextValue) -> str:
    """Render one parameter value as A1111 shows it: `7` for 7.0, `7.5`, `0.75`, `True`.

    A1111's numbers come from the browser as JSON, so a whole-number float reaches the infotext as
    an int ("CFG scale: 7"); other floats use Python's shortest round-trip repr ("0.75").
    """
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):  # also numpy integers, e.g. a seed from a numpy RNG
        return str(int(value))
    if isinstance(value, numbers.Real):
        number = float(value)
        return str(int(number)) if number.is_integer() else repr(number)
    return str(value)


def check_infotext_prompts(prompt: object, negative_prompt: object) -> None:
    """Reject prompts an infotext cannot record faithfully; pipelines call this before generating.

    A prompt line starting with "Negative prompt:" would be read back as the start of the
    negative prompt (by A1111 and by us), silently moving text from one prompt to the other.
    """
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str, got {type(prompt).__name__}: {prompt!r}")
    if not isinstance(negative_prompt, str):
        raise TypeError(f"negative_prompt must be a str, got {type(negative_prompt).__name__}: {negative_prompt!r}")
    for name, text in (("prompt", prompt), ("negative_prompt", negative_prompt)):
        for line in text.split("\n"):
            if line.strip().startswith(NEGATIVE_PROMPT_PREFIX):
                raise ValueError(
                    f"{name} line {line!r} starts with {NEGATIVE_PROMPT_PREFIX!r}, which infotext readers take for "
                    "the start of the negative prompt. Remove that label (pass negative text as negative_prompt)."
                )


def check_infotext_inputs(prompt: object, negative_prompt: object, params: object) -> None:
    """Validate `build_infotext` arguments; raise TypeError/ValueError naming the bad value."""
    check_infotext_prompts(prompt, negative_prompt)
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping of A1111 keys to values, got {type(params).__name__}")
    for key, value in params.items():
        if not isinstance(key, str) or KEY_PATTERN.fullmatch(key) is None:
            raise ValueError(
                f"infotext key {key!r} is not valid: a key is 2+ characters of letters, digits, '_', ' ', '-' or '/', "
                "starting with a letter, digit or '_' (e.g. 'CFG scale')"
            )
        if value is not None and not isinstance(value, (str, numbers.Real)):
            raise TypeError(
                f"infotext value for {key!r} must be str, int, float, bool or None, got {type(value).__name__}: {value!r}"
            )
        if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral) and not math.isfinite(value):
            raise ValueError(f"infotext value for {key!r} is {value!r}; only finite numbers can be written")
    written = [key for key, value in params.items() if value is not None and value != ""]
    if len(written) < MIN_PARAMS_FOR_PARAM_LINE:
        raise ValueError(
            f"infotext needs at least {MIN_PARAMS_FOR_PARAM_LINE} non-empty parameters (got {written}); with fewer, "
            "A1111 reads the parameter line back as part of the prompt. Add e.g. Steps, Sampler and CFG scale."
        )


def build_infotext(prompt: str, negative_prompt: str, params: Mapping[str, InfotextValue | None]) -> str:
    """Write the A1111 infotext for one image.

    `params` maps A1111 keys to values in the order they should appear (A1111's txt2img order is
    Steps, Sampler, Schedule type, CFG scale, Seed, Size, Model hash, Model, VAE hash, VAE,
    Variation seed, Variation seed strength, Denoising strength, Clip skip, ..., Lora hashes,
    TI hashes, Version); `None` and empty-string values are left out, as A1111 leaves out unused
    settings. The negative prompt line is written only when the negative prompt is non-empty.

    `split_infotext(build_infotext(p, n, params))` gives back `p`, `n` and every written value as
    its string form (`format_value`), provided the prompts have no whitespace at the start or end
    of a line and do not start with an empty line (A1111's reader strips those).
    """
    check_infotext_inputs(prompt, negative_prompt, params)
    pairs = [
        f"{key}: {quote_value(format_value(value))}" for key, value in params.items() if value is not None and value != ""
    ]
    negative_line = f"\n{NEGATIVE_PROMPT_PREFIX} {negative_prompt}" if negative_prompt else ""
    return f"{prompt}{negative_line}\n{', '.join(pairs)}".strip()


def param_pairs(line: str) -> list[tuple[str, str]]:
    """`PARAM_PATTERN.findall(line)`, in time linear in the line's length.

    findall retries the pattern at every position, and each attempt inside a long run of key characters (letters,
    digits, spaces, "-", "/") scans to the run's end looking for its ":": quadratic, so a one-line infotext of
    200,000 letters took minutes (an API request's `infotext`, a PNG's text chunk). An attempt that starts a key and
    fails has found a run not followed by ":"; every later start inside that run reaches the same end and fails
    too, so the search resumes after the run. The pairs found are findall's.
    """
    pairs: list[tuple[str, str]] = []
    position = 0
    while position < len(line):
        match = PARAM_PATTERN.match(line, position)
        if match is not None:
            pairs.append(match.groups())
            position = match.end()
            continue
        run = KEY_RUN_PATTERN.match(line, position)
        position = run.end() if run is not None else position + 1
    return pairs


def split_infotext(text: str) -> tuple[str, str, dict[str, str]]:
    """Split an infotext into (prompt, negative prompt, {key: value}) with values exactly as written.

    This is the inverse of `build_infotext` (values come back as their string form, quotes
    removed); `parse_infotext` adds A1111's interpretation on top.
    """
    if not isinstance(text, str):
        raise TypeError(f"infotext must be a str, got {type(text).__name__}")
    *lines, last_line = text.strip().split("\n")
    if len(param_pairs(last_line)) < MIN_PARAMS_FOR_PARAM_LINE:
        lines.append(last_line)
        last_line = ""

    prompt_lines: list[str] = []
    negative_lines: list[str] = []
    for line in lines:
        line = line.strip()
        if line.startswith(NEGATIVE_PROMPT_PREFIX):
            negative_lines.append(line[len(NEGATIVE_PROMPT_PREFIX) :].strip())
        elif negative_lines:
            negative_lines.append(line)
        else:
            prompt_lines.append(line)
    params = {key: unquote_value(raw_value) for key, raw_value in param_pairs(last_line)}
    return join_lines_like_a1111(prompt_lines), join_lines_like_a1111(negative_lines), params


def parse_infotext(text: str, *, defaults: bool = True) -> dict[str, object]:
    """Read an A1111 infotext back into a dict, as A1111's `parse_generation_parameters` does.

    The result has "Prompt" and "Negative prompt" first, then every `Key: value` of the last line
    as strings (quoted values decoded); an `NxM` value such as `Size: 512x768` becomes
    `Size-1: "512"` and `Size-2: "768"`. With `defaults=True` the keys A1111 fills in for older
    or shorter infotexts are added too (see `pipelines.infotext_defaults`), e.g. "Clip skip": "1".
    """
    prompt, negative_prompt, params = split_infotext(text)
    result: dict[str, object] = {"Prompt": prompt, "Negative prompt": negative_prompt}
    for key, value in params.items():
        size = IMAGE_SIZE_PATTERN.match(value)
        if size is not None:
            result[f"{key}-1"] = size.group(1)
            result[f"{key}-2"] = size.group(2)
        else:
            result[key] = value
    if defaults:
        apply_a1111_defaults(result)
    return result


def parse_optimization(infotext: str | Mapping[str, object]):
    """The optimisation labels of an infotext (text, or a `parse_infotext` / `split_infotext` dict).

    Returns `pipelines.approx.OptimizationLabels`: `.exact` holds the `Optimization:` parts
    (preset, precision, layout ...), `.taesd`, `.deepcache`, `.tome` the approximate settings and
    `.approximate` whether any is on. Raises ValueError naming a malformed key.
    """
    from pipelines.approx.labels import OptimizationLabels

    params = split_infotext(infotext)[2] if isinstance(infotext, str) else infotext
    if not isinstance(params, Mapping):
        raise TypeError(f"infotext must be a str or a mapping of infotext keys, got {type(infotext).__name__}")
    return OptimizationLabels.from_infotext(params)


def join_lines_like_a1111(lines: list[str]) -> str:
    """Join prompt lines as A1111 does: empty lines before the first non-empty one are dropped."""
    joined = ""
    for line in lines:
        joined += ("" if joined == "" else "\n") + line
    return joined
