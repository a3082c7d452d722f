"""The task contract: typed inputs and outputs, named options, and the models a task needs.

A task is a small class registered in `TASKS`. It declares everything a chain needs to be
validated (ports, option defaults, model roles and their kinds) as class attributes, so nothing
is instantiated or loaded to check a chain. Weights are fetched through `ModelAccess` only inside
`run`, on first use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from mixkit.registry import Registry


@dataclass(frozen=True)
class Port:
    """One input of a task: its port type (see `appflow.ports`) and whether it may be omitted."""

    type: str
    optional: bool = False
    description: str = ""


class ModelAccess(Protocol):
    """What a task sees of the model cache: `models.get(role)` loads (once) and returns the model."""

    def get(self, role: str) -> Any: ...


class Task:
    """Base class of AppFlow tasks; subclasses fill in the class attributes and `run`."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    inputs: ClassVar[dict[str, Port]] = {}
    outputs: ClassVar[dict[str, str]] = {}  # output name -> port type
    main_output: ClassVar[str] = ""
    models: ClassVar[dict[str, str]] = {}  # role -> model kind (see `appflow.model_kinds`)
    default_models: ClassVar[dict[str, str]] = {}  # role -> hub id used when the user gives none
    options: ClassVar[dict[str, Any]] = {}  # option name -> default value
    # other spellings of options (PaddleMIX's `guidance_scale` for `cfg_scale`) -> the option they stand for
    option_aliases: ClassVar[dict[str, str]] = {}

    def __init__(self, **options: Any) -> None:
        options = self.canonical_options(options)
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise TypeError(f"Task {self.name!r} has no option(s) {unknown}; its options are {sorted(self.options)}.")
        self.settings = {**self.options, **options}
        self.check_options(self.settings)

    @classmethod
    def canonical_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        """`options` with aliases renamed to the options they stand for; two spellings of one option are an error."""
        return rename_aliases(options, cls.option_aliases, f"Task {cls.name!r}")

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        """Raise ValueError/TypeError for a bad option value; called before any model loads (at build and per call)."""

    def run(self, models: ModelAccess, options: dict[str, Any], **inputs: Any) -> dict[str, Any]:
        """Compute the outputs from the inputs; `options` is `settings` with per-call overrides."""
        raise NotImplementedError


def rename_aliases(options: dict[str, Any], aliases: dict[str, str], who: str) -> dict[str, Any]:
    """`options` with each alias renamed to its option; the same option under two spellings is a TypeError."""
    renamed: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for name, value in options.items():
        canonical = aliases.get(name, name)
        if canonical in renamed:
            raise TypeError(f"{who} got option {canonical!r} twice, as {spelled[canonical]!r} and as {name!r} "
                            "(the same option); pass only one.")
        renamed[canonical], spelled[canonical] = value, name
    return renamed


TASKS: Registry[type[Task]] = Registry("AppFlow task")


def register_task(cls: type[Task]) -> type[Task]:
    """Class decorator: check the declarations and add the task to `TASKS` under `cls.name`."""
    from appflow.ports import PORT_TYPES

    for key, port in cls.inputs.items():
        PORT_TYPES.get(port.type)  # unknown port type -> UnknownNameError listing the valid ones
    for key, port_type in cls.outputs.items():
        PORT_TYPES.get(port_type)
    if cls.main_output not in cls.outputs:
        raise ValueError(f"Task {cls.name!r}: main_output {cls.main_output!r} is not one of its outputs "
                         f"{sorted(cls.outputs)}.")
    TASKS.register(cls.name, cls)
    return cls
