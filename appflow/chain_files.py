"""Chains described as data (a dict, a JSON or a YAML file), for chains defined outside Python.

    name: caption_then_detect
    inputs: [image]
    steps:
      - {task: image_caption}
      - {task: open_vocabulary_detection, inputs: {prompt: image_caption.text}, options: {box_threshold: 0.3}}
    result: open_vocabulary_detection.boxes
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from appflow.chain import Chain, ChainError, Step

_CHAIN_KEYS = {"name", "steps", "inputs", "result", "outputs", "default_models", "description", "input_aliases",
               "unavailable_outputs"}
_STEP_KEYS = {"task", "id", "inputs", "options"}


def _expect(value: Any, kind: type, where: str) -> Any:
    if not isinstance(value, kind):
        raise ChainError(f"{where} must be a {kind.__name__}, got {type(value).__name__} {value!r}.")
    return value


def chain_from_dict(data: dict, where: str = "chain") -> Chain:
    """Build a `Chain` from its plain-data description; errors name the offending key."""
    _expect(data, dict, where)
    unknown = sorted(set(data) - _CHAIN_KEYS)
    if unknown:
        raise ChainError(f"{where} has unknown key(s) {unknown}; allowed: {sorted(_CHAIN_KEYS)}.")
    if "steps" not in data:
        raise ChainError(f"{where} has no 'steps' list.")
    steps = []
    for index, item in enumerate(_expect(data["steps"], list, f"{where}: 'steps'")):
        at = f"{where}: steps[{index}]"
        _expect(item, dict, at)
        bad = sorted(set(item) - _STEP_KEYS)
        if bad:
            raise ChainError(f"{at} has unknown key(s) {bad}; allowed: {sorted(_STEP_KEYS)}.")
        if "task" not in item:
            raise ChainError(f"{at} has no 'task'.")
        steps.append(Step(task=_expect(item["task"], str, f"{at}.task"), id=_expect(item.get("id", ""), str, f"{at}.id"),
                          inputs=dict(_expect(item.get("inputs", {}), dict, f"{at}.inputs")),
                          options=dict(_expect(item.get("options", {}), dict, f"{at}.options"))))
    inputs = data.get("inputs")
    if inputs is not None:
        inputs = [_expect(name, str, f"{where}: inputs entry") for name in _expect(inputs, list, f"{where}: 'inputs'")]
    return Chain(
        name=_expect(data.get("name", "custom"), str, f"{where}: 'name'"), steps=steps, inputs=inputs,
        result=_expect(data.get("result", ""), str, f"{where}: 'result'"),
        outputs=dict(_expect(data.get("outputs", {}), dict, f"{where}: 'outputs'")),
        default_models=dict(_expect(data.get("default_models", {}), dict, f"{where}: 'default_models'")),
        description=_expect(data.get("description", ""), str, f"{where}: 'description'"),
        input_aliases=dict(_expect(data.get("input_aliases", {}), dict, f"{where}: 'input_aliases'")),
        unavailable_outputs=dict(_expect(data.get("unavailable_outputs", {}), dict, f"{where}: 'unavailable_outputs'")),
    )


def load_chain(path: str | os.PathLike) -> Chain:
    """Read a chain from a `.json`, `.yaml` or `.yml` file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Chain file {str(path)!r} does not exist.")
    text = path.read_text(encoding="utf-8")
    suffix = path.suffix.lower()
    if suffix == ".json":
        try:
            data = json.loads(text)
        except ValueError as error:
            raise ChainError(f"Chain file {str(path)!r} is not valid JSON: {error}") from None
    elif suffix in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text)  # safe_load: a chain file must never construct Python objects
        except yaml.YAMLError as error:
            raise ChainError(f"Chain file {str(path)!r} is not valid YAML: {error}") from None
    else:
        raise ChainError(f"Chain file {str(path)!r} must end in .json, .yaml or .yml.")
    return chain_from_dict(data, where=f"chain file {str(path)!r}")
