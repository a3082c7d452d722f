"""Chains: named steps wired by port names, validated as a graph before any model loads.

A step's input `key` is bound, in this order, to: an explicit reference in `step.inputs`
("<step id>.<output>" or an app input name), the app input `key` if the chain declares it, the
nearest earlier step that outputs `key` (a pipe), or else an app input `key`.

An optional input is the exception: it never joins an app input that another step reads as a
*required* input of the same name. In a text-to-image -> caption chain the app's `prompt` is what
to draw; the captioner's optional `prompt` (a caption prefix) means something else, and binding
it by name made the captioner continue the drawing prompt. It is left at its default (or piped
from an earlier step's output of that name); bind it explicitly (`inputs={"prompt": "prefix"}`)
to expose it. PaddleMIX apps avoid the clash by naming: its captioner reads `blip2_prompt`.

Validation resolves every binding, checks that port types match, that every input exists (the
chain's declared inputs or another step's output), that model roles agree, and that the steps
form no cycle; each problem is one error naming the step and the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from appflow.task import TASKS, Port, Task
from mixkit.errors import UnknownNameError


class ChainError(ValueError):
    """A chain is not well formed (unknown task, missing input, type mismatch, cycle)."""


@dataclass
class Step:
    """One task in a chain; `id` defaults to the task name."""

    task: str
    id: str = ""
    inputs: dict[str, str] = field(default_factory=dict)  # input key -> "step.output" or app input name
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.id = self.id or self.task


@dataclass
class Chain:
    """A named sequence of steps; `inputs` (if given) is the closed list of the app's inputs."""

    name: str
    steps: list[Step]
    inputs: list[str] | None = None
    result: str = ""  # "step.output" of the main result; default: the last step's main output
    outputs: dict[str, str] = field(default_factory=dict)  # extra output name -> "step.output"
    default_models: dict[str, str] = field(default_factory=dict)  # role -> source, over the tasks' defaults
    description: str = ""
    # other spellings of app inputs (PaddleMIX's `blip2_prompt` for the caption prompt) -> the input they stand for
    input_aliases: dict[str, str] = field(default_factory=dict)
    # outputs another project's app of this name has that this chain does not produce -> why (said on lookup)
    unavailable_outputs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Binding:
    step: str | None  # None: an app input
    key: str


@dataclass
class ChainPlan:
    """A validated chain: steps in run order with resolved bindings and the app's typed interface."""

    chain: Chain
    order: list[Step]
    task_classes: dict[str, type[Task]]
    bindings: dict[str, dict[str, Binding]]  # step id -> input key -> source
    app_inputs: dict[str, Port]  # name -> port (optional only if optional for every consumer)
    consumers: dict[str, list[str]]  # app input -> ids of the steps that read it
    outputs: dict[str, Binding]  # app output name -> source (includes "result")
    model_roles: dict[str, str]  # role -> model kind, in first-use order


def _parse_reference(text: str) -> tuple[str | None, str]:
    if not isinstance(text, str) or not text.strip():
        raise ChainError(f"A binding must be 'step.output' or an app input name, got {text!r}.")
    step, dot, key = text.partition(".")
    return (step, key) if dot else (None, text)


def validate_chain(chain: Chain) -> ChainPlan:
    """Check the whole chain and return its plan; raises ChainError naming the step and key."""
    if not chain.steps:
        raise ChainError(f"Chain {chain.name!r} has no steps.")
    classes: dict[str, type[Task]] = {}
    steps: dict[str, Step] = {}
    for step in chain.steps:
        if step.id in steps:
            raise ChainError(f"Chain {chain.name!r}: two steps have id {step.id!r}; give them distinct `id`s.")
        try:
            classes[step.id] = TASKS.get(step.task)
        except UnknownNameError as error:
            raise ChainError(f"Chain {chain.name!r}, step {step.id!r}: {error}") from None
        steps[step.id] = step
        cls = classes[step.id]
        where = f"Chain {chain.name!r}, step {step.id!r}"
        try:
            options = cls.canonical_options(step.options)
        except TypeError as error:
            raise ChainError(f"{where}: {error}") from None
        unknown = sorted(set(options) - set(cls.options))
        if unknown:
            raise ChainError(f"{where}: task {step.task!r} has no option(s) {unknown}; "
                             f"its options are {sorted(cls.options)}.")
        try:
            if options:  # (a chain that sets none has nothing to check, and listing apps stays light)
                cls.check_options({**cls.options, **options})
        except (TypeError, ValueError) as error:
            raise ChainError(f"{where}: {error}") from None
    position = {step_id: index for index, step_id in enumerate(steps)}
    producers: dict[str, list[str]] = {}
    for step_id, cls in classes.items():
        for output in cls.outputs:
            producers.setdefault(output, []).append(step_id)

    bindings: dict[str, dict[str, Binding]] = {}
    app_inputs: dict[str, Port] = {}
    consumers: dict[str, list[str]] = {}
    owned = _app_inputs_read_as_required(chain, steps, classes, producers, position)
    for step_id, step in steps.items():
        cls = classes[step_id]
        unknown = sorted(set(step.inputs) - set(cls.inputs))
        if unknown:
            raise ChainError(f"Chain {chain.name!r}, step {step_id!r}: task {step.task!r} has no input(s) {unknown}; "
                             f"its inputs are {sorted(cls.inputs)}.")
        bindings[step_id] = {}
        for key, port in cls.inputs.items():
            where = f"Chain {chain.name!r}, step {step_id!r}, input {key!r}"
            earlier = [p for p in producers.get(key, []) if position[p] < position[step_id]]
            if key in step.inputs:
                source_step, source_key = _parse_reference(step.inputs[key])
            elif port.optional and key in owned:
                if not earlier:
                    continue  # another step's required input of that name: not this one's; the task default applies
                source_step, source_key = earlier[-1], key
            elif chain.inputs is not None and key in chain.inputs:
                source_step, source_key = None, key
            else:
                source_step, source_key = (earlier[-1], key) if earlier else (None, key)
            if source_step is not None:
                if source_step not in classes:
                    raise ChainError(f"{where} refers to step {source_step!r}, which is not in the chain "
                                     f"(steps: {list(steps)}).")
                produced = classes[source_step].outputs
                if source_key not in produced:
                    raise ChainError(f"{where}: step {source_step!r} has no output {source_key!r}; "
                                     f"its outputs are {sorted(produced)}.")
                if produced[source_key] != port.type:
                    raise ChainError(f"{where} expects {port.type!r} but {source_step}.{source_key} is "
                                     f"{produced[source_key]!r}.")
            else:
                if chain.inputs is not None and source_key not in chain.inputs and not port.optional:
                    raise ChainError(f"{where}: nothing provides {source_key!r} (not an output of any step, not among the "
                                     f"chain's inputs {chain.inputs}); add it to `inputs` or bind it to a step output.")
                if chain.inputs is not None and source_key not in chain.inputs:
                    continue  # an optional input the app does not expose: the task uses its default
                previous = app_inputs.get(source_key)
                if previous is not None and previous.type != port.type:
                    raise ChainError(f"{where} expects {port.type!r} but app input {source_key!r} is already "
                                     f"{previous.type!r} for another step.")
                optional = port.optional and (previous is None or previous.optional)
                batch = port.batch and (previous is None or previous.batch)
                # read as a mask only when every step reading it takes a mask (an image step needs its colours)
                mask = port.mask and (previous is None or previous.mask)
                app_inputs[source_key] = Port(port.type, optional, port.description, batch, mask)
                consumers.setdefault(source_key, []).append(step_id)
            bindings[step_id][key] = Binding(source_step, source_key)
    for name in chain.inputs or []:
        if name not in app_inputs:
            raise ChainError(f"Chain {chain.name!r} declares input {name!r}, but no step reads it.")

    for alias, name in chain.input_aliases.items():
        if name not in app_inputs or alias in app_inputs:
            raise ChainError(f"Chain {chain.name!r}: input alias {alias!r} -> {name!r} must name one of the app's inputs "
                             f"{sorted(app_inputs)} and must not be one itself.")
    order = _topological_order(chain, steps, bindings)
    roles = _model_roles(chain, order, classes)
    outputs = _outputs(chain, order, classes)
    return ChainPlan(chain, order, classes, bindings, app_inputs, consumers, outputs, roles)


def _app_inputs_read_as_required(chain: Chain, steps: dict[str, Step], classes: dict[str, type[Task]],
                                 producers: dict[str, list[str]], position: dict[str, int]) -> set[str]:
    """Names of the app inputs some step reads as a required input (explicitly or by name).

    An optional input of another step does not join such an app input by name (see the module docstring)."""
    owned: set[str] = set()
    for step_id, step in steps.items():
        for key, port in classes[step_id].inputs.items():
            if port.optional:
                continue
            if key in step.inputs:
                source_step, source_key = _parse_reference(step.inputs[key])
                if source_step is None:
                    owned.add(source_key)
            elif chain.inputs is not None and key in chain.inputs:
                owned.add(key)
            elif not any(position[p] < position[step_id] for p in producers.get(key, [])):
                owned.add(key)
    return owned


def _topological_order(chain: Chain, steps: dict[str, Step], bindings: dict[str, dict[str, Binding]]) -> list[Step]:
    """Steps ordered so every step runs after the steps it reads from (stable: ties keep chain order)."""
    needs = {sid: {b.step for b in bound.values() if b.step is not None} for sid, bound in bindings.items()}
    done: list[str] = []
    remaining = list(steps)
    while remaining:
        ready = [sid for sid in remaining if needs[sid] <= set(done)]
        if not ready:
            edges = [f"{sid}.{key} <- {b.step}.{b.key}" for sid in remaining for key, b in bindings[sid].items()
                     if b.step in remaining]
            raise ChainError(f"Chain {chain.name!r} has a cycle between steps {remaining}: {'; '.join(edges)}.")
        done.append(ready[0])
        remaining.remove(ready[0])
    return [steps[sid] for sid in done]


def _model_roles(chain: Chain, order: list[Step], classes: dict[str, type[Task]]) -> dict[str, str]:
    roles: dict[str, str] = {}
    for step in order:
        for role, kind in classes[step.id].models.items():
            if roles.setdefault(role, kind) != kind:
                raise ChainError(f"Chain {chain.name!r}, step {step.id!r}: model role {role!r} is {kind!r} here but "
                                 f"{roles[role]!r} in an earlier step; use distinct role names.")
    return roles


def _outputs(chain: Chain, order: list[Step], classes: dict[str, type[Task]]) -> dict[str, Binding]:
    outputs: dict[str, Binding] = {}
    for step in order:  # every step output is exposed; a later step's output wins a name clash
        for key in classes[step.id].outputs:
            outputs[key] = Binding(step.id, key)
    last = order[-1]
    references = {"result": chain.result or f"{last.id}.{classes[last.id].main_output}", **chain.outputs}
    for name, reference in references.items():
        step_id, key = _parse_reference(reference)
        if step_id not in classes or key not in classes[step_id].outputs:
            raise ChainError(f"Chain {chain.name!r}: output {name!r} refers to {reference!r}, which is not a step output.")
        outputs[name] = Binding(step_id, key)
    return outputs
