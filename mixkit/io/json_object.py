"""Reading a settings file that must hold one JSON object, with one wording for every way it can be wrong.

Trainer configs, the UI settings file, a model's recommended settings and a diffusers folder's configs are all
"a JSON object in a file a person may have edited"; each caller says what the file is and what to do about it.
"""

from __future__ import annotations

import json
from pathlib import Path


def json_kind(value: object) -> str:
    """The JSON name of a decoded value's type (array, string, number, ...), for messages about a file's content."""
    return {list: "array", str: "string", bool: "boolean", int: "number", float: "number",
            type(None): "null", dict: "object"}.get(type(value), type(value).__name__)


def parse_json_object(text: str, where: str, fix: str, error: type[Exception] = ValueError) -> dict:
    """`text` decoded as a JSON object; otherwise `error` saying what `where` holds and what to do (`fix`)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as problem:
        raise error(f"{where} is not valid JSON ({problem.msg}, line {problem.lineno}); {fix}") from None
    if not isinstance(data, dict):
        raise error(f"{where} must hold a JSON object, not a JSON {json_kind(data)}; {fix}")
    return data


def read_json_object(path: str | Path, where: str, fix: str, error: type[Exception] = ValueError) -> dict:
    """The JSON object in file `path` (which must exist); unreadable, non-UTF-8, broken or non-object content
    raises `error` naming `where` and saying `fix`."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise error(f"{where} is not UTF-8 text; {fix}") from None
    except OSError as problem:
        raise error(f"{where} cannot be read ({problem.strerror or problem}); {fix}") from None
    return parse_json_object(text, where, fix, error)
