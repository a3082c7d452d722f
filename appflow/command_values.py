"""App inputs, options and models from command-line strings (`mixkit apps run`, `python -m appflow run`).

Each value is typed by what the app declares, so the command line offers exactly what the Python API validates:
inputs by their port types (`describe_app(...)["inputs"]`: text as given, an image as a file path or URL, several
images as paths or folders), options by the type of their default (an integer default takes a number, a boolean one
true/false). Ranges are not checked here: the typed values go to `Appflow`, whose own option checks refuse them
(one copy of every bound, in the tasks), before any model loads.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tif", ".tiff")
"""What a folder given to an image-list input contributes (sorted by name); other files there are skipped."""

TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")
AUTO_WORDS = ("auto", "none", "null")


def split_assignments(pairs: list[str] | None, flag: str) -> list[tuple[str, str]]:
    """`["NAME=VALUE", ...]` as (name, value) pairs in order; ValueError naming `flag` for one without '='."""
    split = []
    for pair in pairs or []:
        name, equals, value = pair.partition("=")
        if not equals or not name.strip():
            raise ValueError(f"{flag} {pair!r} must be NAME=VALUE (e.g. {flag} prompt='a red fox').")
        split.append((name.strip(), value))
    return split


def parse_flag(where: str, text: str) -> bool:
    if text.strip().lower() in TRUE_WORDS:
        return True
    if text.strip().lower() in FALSE_WORDS:
        return False
    raise ValueError(f"{where} takes true or false, got {text!r}.")


def parse_number(where: str, text: str) -> int | float:
    """An int when the text is one, else a finite-or-not float (the app's own check refuses NaN and infinities)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{where} takes a number, got {text!r}.") from None


def parse_json(where: str, text: str, kind: type) -> Any:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where} takes JSON ({kind.__name__}), got {text!r} ({error.msg}).") from None
    except RecursionError:  # "[[[[..." nested past Python's recursion limit
        raise ValueError(f"{where} takes JSON ({kind.__name__}) nested less deeply.") from None
    if not isinstance(value, kind):
        raise ValueError(f"{where} takes a JSON {kind.__name__}, got {type(value).__name__}.")
    return value


def option_value(where: str, text: str, default: Any) -> Any:
    """One option's value from its text, typed by the option's default; None ("auto") defaults are guessed: auto /
    none -> None (the model's own choice), then a number, true/false, JSON [..] or {..}, else the text."""
    if isinstance(default, bool):
        return parse_flag(where, text)
    if isinstance(default, (int, float)):
        value = parse_number(where, text)
        return float(value) if isinstance(default, float) else value
    if isinstance(default, (list, tuple)):
        return parse_json(where, text, list) if text.lstrip().startswith("[") else [text]
    if isinstance(default, dict):
        return parse_json(where, text, dict)
    if isinstance(default, str):
        return text
    stripped = text.strip()
    if stripped.lower() in AUTO_WORDS:
        return None
    if stripped.lower() in ("true", "false"):
        return stripped.lower() == "true"
    try:
        number = parse_number(where, stripped)
    except ValueError:
        pass
    else:
        if not (isinstance(number, float) and math.isnan(number) and stripped.lower() != "nan"):
            return number
    if stripped.startswith(("[", "{")):
        return parse_json(where, stripped, list if stripped.startswith("[") else dict)
    return text


def options_from_strings(description: dict, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """`--option NAME=VALUE` pairs as typed options of the app `description` (`describe_app`); an option with a
    list default collects every value given for it (`--option loras=a.safetensors --option loras=b:0.5`)."""
    app, defaults, aliases = description["name"], description["options"], description["option_aliases"]
    options: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for name, text in pairs:
        canonical = aliases.get(name, name)
        if canonical not in defaults:
            raise ValueError(f"App {app!r} has no option {name!r}; its options: {', '.join(sorted(defaults))}"
                             + (f" (also spelled {', '.join(sorted(aliases))})" if aliases else "")
                             + f". `mixkit apps describe {app}` shows their defaults.")
        where = f"App {app!r}: --option {name}"
        if canonical in spelled and spelled[canonical] != name:
            raise ValueError(f"{where}: option {canonical!r} was also given as {spelled[canonical]!r}; pass it once.")
        value = option_value(where, text, defaults[canonical])
        if isinstance(defaults[canonical], (list, tuple)) and canonical in options:
            options[canonical] = [*options[canonical], *value]
        elif canonical in options:
            raise ValueError(f"{where} is given twice ({options[canonical]!r} and {value!r}); pass it once.")
        else:
            options[canonical] = value
        spelled[canonical] = name
    return options


def models_from_strings(description: dict, roles: list[tuple[str, str]], sources: list[str]) -> dict | list | None:
    """`--models ROLE=SOURCE` pairs as a dict, or `--model SOURCE` values as the list `Appflow(models=[...])` takes
    (one per role, in role order); None for the app's default models."""
    app, known = description["name"], list(description["models"])
    if roles and sources:
        raise ValueError("Give the models either by role (--models ROLE=SOURCE) or in role order (--model SOURCE), "
                         "not both.")
    if sources:
        if len(sources) > len(known):
            raise ValueError(f"App {app!r} takes {len(known)} model(s) ({', '.join(known)}), got {len(sources)} "
                             f"--model values.")
        return list(sources)
    models: dict[str, str] = {}
    for role, source in roles:
        if role not in known:
            raise ValueError(f"App {app!r} has no model role {role!r}; its roles: {', '.join(known)}.")
        if role in models:
            raise ValueError(f"App {app!r}: model role {role!r} is given twice; pass it once.")
        models[role] = source
    return models or None


def folder_images(where: str, folder: Path) -> list[str]:
    found = sorted(str(path) for path in folder.iterdir() if path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES)
    if not found:
        raise ValueError(f"{where}: folder {str(folder)!r} holds no image files ({', '.join(IMAGE_SUFFIXES)}).")
    return found


def image_source(where: str, value: Any, *, folders: bool) -> list[str]:
    """The image file(s) one value names: a file path or URL, or (`folders`) a folder's images; checked to exist."""
    if not isinstance(value, (str, os.PathLike)) or not str(value).strip():
        raise ValueError(f"{where} takes an image file path or URL, got {value!r}.")
    text = os.fspath(value)
    if text.lower().startswith(("http://", "https://")):
        return [text]
    path = Path(text).expanduser()
    if path.is_dir():
        if not folders:
            raise ValueError(f"{where}: {text!r} is a folder; this input takes one image file.")
        return folder_images(where, path)
    if not path.is_file():
        raise ValueError(f"{where}: no image file {text!r}; check the path.")
    return [str(path)]


# Inputs are texts and image paths; 16 MB holds any real set of them. Reading stops there, so `--inputs-json
# /dev/zero` (or a wrong, huge file) is refused instead of filling memory.
MAX_INPUTS_JSON_CHARS = 16 * 1024 * 1024


def read_inputs_json(path: str | os.PathLike) -> dict[str, Any]:
    """The object of an `--inputs-json FILE` (input name -> JSON value: text, list of texts, image path(s), ...)."""
    file = Path(path).expanduser()
    try:
        with open(file, encoding="utf-8") as stream:
            text = stream.read(MAX_INPUTS_JSON_CHARS + 1)
        if len(text) > MAX_INPUTS_JSON_CHARS:
            raise ValueError(f"--inputs-json {str(path)!r} holds more than {MAX_INPUTS_JSON_CHARS // (1024 * 1024)} "
                             "MB; inputs are texts and image paths, so check the path.")
        data = json.loads(text)
    except FileNotFoundError:
        raise ValueError(f"--inputs-json: no file {str(path)!r}.") from None
    except RecursionError:  # "[[[[..." nested past Python's recursion limit
        raise ValueError(f"--inputs-json {str(path)!r} nests its JSON too deeply; inputs are texts, lists of texts "
                         "and image paths.") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"--inputs-json {str(path)!r} is not readable JSON ({error}).") from None
    if not isinstance(data, dict):
        raise ValueError(f"--inputs-json {str(path)!r} must hold a JSON object of input name -> value, got "
                         f"{type(data).__name__}.")
    return data


def inputs_from_strings(description: dict, pairs: list[tuple[str, str]],
                        json_inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    """App inputs from `--input NAME=VALUE` pairs and an `--inputs-json` object, typed by the declared ports.

    An input given several times is a list (an app input that takes a list: `images`, `labels`, a batched `image`);
    a folder given to such an image input stands for its image files. A required input that is missing is an error
    here, saying which flag to pass."""
    from appflow.task import rename_aliases

    app, declared = description["name"], description["inputs"]
    batched = set(description.get("batch_inputs", ()))
    aliases = description.get("input_aliases", {})
    given: dict[str, list[Any]] = {}
    for name, text in pairs:
        given.setdefault(aliases.get(name, name), []).append(text)
    for name, value in rename_aliases(dict(json_inputs or {}), aliases, f"App {app!r}", "input").items():
        if name in given:
            raise ValueError(f"App {app!r}: input {name!r} is given both by --input and in --inputs-json; pass it "
                             "once.")
        given[name] = [value]
    unknown = sorted(set(given) - set(declared))
    if unknown:
        spellings = "".join(f", {alias!r} for {name!r}" for alias, name in aliases.items())
        raise ValueError(f"App {app!r} has no input(s) {unknown}; its inputs: "
                         f"{', '.join(f'{n} ({k})' for n, k in declared.items())}{spellings}.")
    typed = {}
    for name, kind in declared.items():
        port, optional = kind.rstrip("?"), kind.endswith("?")
        if name not in given:
            if not optional:
                raise ValueError(f"App {app!r} needs input {name!r} ({port}): pass --input {name}="
                                 f"{'PATH' if port.startswith('image') else 'VALUE'}.")
            continue
        typed[name] = typed_input(f"App {app!r}: input {name!r} ({port})", port, given[name], name in batched)
    return typed


def typed_input(where: str, port: str, values: list[Any], batched: bool) -> Any:
    """One input's value from the values given for it (strings from --input, JSON values from --inputs-json)."""
    items = [item for value in values for item in (value if isinstance(value, list) else [value])]
    many = len(values) > 1 or isinstance(values[0], list)
    if port in ("image", "images"):
        takes_list = port == "images" or batched
        if many and not takes_list:
            raise ValueError(f"{where} takes one image, got {len(items)}.")
        paths = [path for item in items for path in image_source(where, item, folders=takes_list)]
        if port == "images":
            return paths
        return paths if batched and (many or len(paths) > 1) else paths[0]
    if port in ("text", "texts"):
        if not all(isinstance(item, str) for item in items):
            raise ValueError(f"{where} takes text, got {', '.join(type(item).__name__ for item in items)}.")
        if port == "texts":
            return items
        if many and not batched:
            raise ValueError(f"{where} takes one text, got {len(items)}; pass it once.")
        return items if many else items[0]
    if len(values) > 1:
        raise ValueError(f"{where} is given {len(values)} times; pass it once.")
    value = values[0]
    if port == "flag":
        return value if isinstance(value, bool) else parse_flag(where, str(value))
    if port == "json":
        return value if isinstance(value, dict) else parse_json(where, str(value), dict)
    raise ValueError(f"{where} cannot be given on the command line (it takes text, texts, image, images, flag and "
                     "json inputs); call the app from Python for it.")
