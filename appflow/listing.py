"""Human-readable listing of the registered apps, shared by `mixkit apps` and `python -m appflow list`."""

from __future__ import annotations

from typing import Any


def format_app(info: dict[str, Any]) -> str:
    """A block of text for one app: description, inputs (type; '?' optional), outputs, default models."""
    inputs = ", ".join(f"{name}: {kind}" for name, kind in info["inputs"].items())
    outputs = ", ".join(name for name in info["outputs"] if name != "result")
    models = "\n".join(f"    {role} ({model['kind']}): {model['default']}" for role, model in info["models"].items())
    lines = [f"{info['name']}", f"  {info['description']}", f"  inputs:  {inputs}",
             f"  outputs: result, {outputs}" if outputs else "  outputs: result",
             f"  chain:   {' -> '.join(info['steps'])}"]
    if models:
        lines += ["  default models:", models]
    return "\n".join(lines)


def format_app_list(infos: list[dict[str, Any]]) -> str:
    return "\n\n".join(format_app(info) for info in infos)
