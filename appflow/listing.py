"""Human-readable listing of the registered apps, shared by `mixkit apps` and `python -m appflow list`."""

from __future__ import annotations

import textwrap
from typing import Any


def format_option(name: str, default: Any) -> str:
    # None means "chosen when the model is known" (its recommended steps/CFG/sampler, or the input image's size).
    return f"{name}={'auto' if default is None else repr(default)}"


def format_app(info: dict[str, Any]) -> str:
    """A block of text for one app: description, inputs (type; '?' optional), outputs, options, default models."""
    inputs = ", ".join(f"{name}: {kind}" for name, kind in info["inputs"].items())
    outputs = ", ".join(name for name in info["outputs"] if name != "result")
    models = "\n".join(f"    {role} ({model['kind']}): {model['default']}" for role, model in info["models"].items())
    options = ", ".join(format_option(name, default) for name, default in info.get("options", {}).items())
    lines = [f"{info['name']}", f"  {info['description']}"]
    if info.get("aliases"):
        lines += [f"  aliases: {', '.join(info['aliases'])}"]
    lines += [f"  inputs:  {inputs}", f"  outputs: result, {outputs}" if outputs else "  outputs: result"]
    if options:
        lines += [textwrap.fill(options, width=110, initial_indent="  options: ", subsequent_indent=" " * 11,
                                break_on_hyphens=False)]
    if info.get("option_aliases"):
        lines += ["  also:    " + ", ".join(f"{alias} (= {name})" for alias, name in info["option_aliases"].items())]
    lines += [f"  chain:   {' -> '.join(info['steps'])}"]
    if models:
        lines += ["  default models:", models]
    return "\n".join(lines)


def format_app_list(infos: list[dict[str, Any]]) -> str:
    return "\n\n".join(format_app(info) for info in infos)
