"""The task contract: typed inputs and outputs, named options, and the models a task needs.

A task is a small class registered in `TASKS`. It declares everything a chain needs to be
validated (ports, option defaults, model roles and their kinds) as class attributes, so nothing
is instantiated or loaded to check a chain. Weights are fetched through `ModelAccess` only inside
`run`, on first use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from mixkit.finite_numbers import is_finite_number  # the one check; appflow's callers import it from here too
from mixkit.registry import Registry


@dataclass(frozen=True)
class Port:
    """One input of a task: its port type (see `appflow.ports`) and whether it may be omitted."""

    type: str
    optional: bool = False
    description: str = ""
    # Also takes a list of values of its type, run as one batch (LAVIS / transformers captioners take a batch of
    # images); an app input batches only when every step reading it does.
    batch: bool = False
    # An image port read as an inpainting mask (white = repaint): its transparency is kept, as A1111 reads masks
    # (strokes on a transparent layer), instead of being flattened on white like other image inputs.
    mask: bool = False


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
    # option name -> its type and bounds (`appflow.option_specs`), for forms; options without one get no widget
    option_specs: ClassVar[dict[str, Any]] = {}
    # other spellings of options (PaddleMIX's `guidance_scale` for `cfg_scale`) -> the option they stand for
    option_aliases: ClassVar[dict[str, str]] = {}
    # a keyword taking a dict of options (PaddleMIX's `generate_kwargs`), spread into the options; "" for none
    options_dict: ClassVar[str] = ""

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
    def options_from_dict(cls, given: dict[str, Any]) -> dict[str, Any]:
        """The options a dict passed as `options_dict` stands for (a task translates other projects' keys here)."""
        return dict(given)

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        """Raise ValueError/TypeError for a bad option value; called before any model loads (at build and per call)."""

    @classmethod
    def check_inputs(cls, inputs: dict[str, Any]) -> None:
        """Raise ValueError for input values that pass their port types but not the task (an empty label list).

        Called before any step runs with the app inputs bound to this task (so before any model loads), and
        by `run` for all of them; `inputs` holds only the keys whose values are known."""

    @classmethod
    def check_options_for_models(cls, options: dict[str, Any], models: dict[str, Any], *, at_call: bool) -> None:
        """Raise ValueError for option values this step's models cannot take (a transcription for an audio model that
        reads none), told from `models` (role -> the source given: hub id or folder, whose config may be read, or
        the loaded object passed in) without loading any. Called when the flow is built (`at_call` False: a value
        still missing may come with the call) and per call before any step runs (`at_call` True), after
        `check_options`. Pass when a source cannot tell (a hub id not cached): `run` refuses it then."""

    def run(self, models: ModelAccess, options: dict[str, Any], **inputs: Any) -> dict[str, Any]:
        """Compute the outputs from the inputs; `options` is `settings` with per-call overrides."""
        raise NotImplementedError


def rename_aliases(options: dict[str, Any], aliases: dict[str, str], who: str, what: str = "option") -> dict[str, Any]:
    """`options` with each alias renamed to its option (or input: `what`); one under two spellings is a TypeError."""
    renamed: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for name, value in options.items():
        canonical = aliases.get(name, name)
        if canonical in renamed:
            raise TypeError(f"{who} got {what} {canonical!r} twice, as {spelled[canonical]!r} and as {name!r} "
                            f"(the same {what}); pass only one.")
        renamed[canonical], spelled[canonical] = value, name
    return renamed


def check_number_option(name: str, value: Any, low: float | None = None, high: float | None = None) -> float:
    """`value` as a float if it is a finite real number in [low, high]; else ValueError naming the option and range.

    NaN is refused: it passes no comparison, so `not low <= nan <= high` checks let it through to the model, where
    e.g. a NaN mask threshold gives all-empty masks without a word."""
    # numbers.Real: numpy scalars too (np.float32 is no float subclass), as the pipelines' own checks take them
    if not is_finite_number(value) or (low is not None and value < low) or (high is not None and value > high):
        bounds = (f" in [{low}, {high}]" if low is not None and high is not None else
                  f" >= {low}" if low is not None else f" <= {high}" if high is not None else "")
        raise ValueError(f"{name} must be a number{bounds}, got {value!r} (NaN and infinities are refused).")
    return float(value)


def check_int_option(name: str, value: Any, low: int, high: int | None = None) -> int:
    """`value` as an int if it is an integer (not a bool; numpy integers too) in [low, high]; else ValueError naming
    the option and range."""
    import numbers

    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low \
            or (high is not None and value > high):
        bounds = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an integer {bounds}, got {value!r}.")
    return int(value)


TASKS: Registry[type[Task]] = Registry("AppFlow task")


def register_task(cls: type[Task] | None = None, *, replace: bool = False):
    """Class decorator: check the declarations and add the task to `TASKS` under `cls.name`.

    `@register_task` refuses a name already taken; `@register_task(replace=True)` (or `register_task(cls,
    replace=True)`) overrides it, as `register_app(..., replace=True)` does for apps, so a notebook cell that
    defines a task can be edited and run again without restarting the kernel."""
    if cls is None:
        return lambda task_class: register_task(task_class, replace=replace)
    from appflow.ports import PORT_TYPES

    for key, port in cls.inputs.items():
        PORT_TYPES.get(port.type)  # unknown port type -> UnknownNameError listing the valid ones
        if port.mask and port.type != "image":
            raise ValueError(f"Task {cls.name!r}: input {key!r} is a mask but of port type {port.type!r}; only "
                             "'image' ports are read as masks.")
    for key, port_type in cls.outputs.items():
        PORT_TYPES.get(port_type)
    stray = sorted(set(cls.option_specs) - set(cls.options))
    if stray:
        raise ValueError(f"Task {cls.name!r}: option_specs {stray} are not options of the task {sorted(cls.options)}.")
    if cls.main_output not in cls.outputs:
        raise ValueError(f"Task {cls.name!r}: main_output {cls.main_output!r} is not one of its outputs "
                         f"{sorted(cls.outputs)}.")
    TASKS.register(cls.name, cls, replace=replace)
    return cls


def spread_options_dicts(app: str, tasks: dict[str, Any], keywords: dict[str, Any]) -> dict[str, Any]:
    """`keywords` with each options dict (PaddleMIX's `generate_kwargs={...}`) spread into single options, as the
    task translates it; a key that is no option, or an option also given outside the dict, is a TypeError."""
    keywords = dict(keywords)
    for step_id, task in tasks.items():
        name = task.options_dict
        if not name or name not in keywords:
            continue
        given = keywords.pop(name)
        if given is None:
            continue
        if not isinstance(given, dict):
            raise TypeError(f"App {app!r}: {name} must be a dict of options such as "
                            f"{{'max_length': 40, 'num_beams': 3}}, got {type(given).__name__}.")
        try:
            options = task.options_from_dict(given)
        except (TypeError, ValueError) as error:
            raise type(error)(f"App {app!r}, step {step_id!r}: {error}") from None
        unknown = sorted(str(key) for key in options if key not in task.options and key not in task.option_aliases)
        if unknown:
            raise TypeError(f"App {app!r}: {name} holds {unknown}, which are not options of this app; its "
                            f"options are {sorted(task.options)} (also spelled {sorted(task.option_aliases)}).")
        twice = sorted(key for key in options if key in keywords)
        if twice:
            raise TypeError(f"App {app!r} got {twice} both in {name} and as keywords; pass each once.")
        keywords.update(options)
    return keywords
