"""`Appflow`: run a registered app (or your own chain) in one call, PaddleMIX-style.

    task = Appflow(app="openset_det_sam", models=["IDEA-Research/grounding-dino-tiny", "facebook/sam-vit-base"])
    result = task(image=img, prompt="dog")   # {"result": masks, "labels": [...], "boxes": ..., "seg_masks": ...}

Building a flow validates the chain and checks every model source against its role (reading
configs only); weights load on the first call that needs them, through the shared model cache.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from appflow.cache import MODEL_CACHE, ModelCache
from appflow.chain import Chain, ChainPlan, validate_chain
from appflow.model_kinds import MODEL_KINDS, check_fit
from appflow.ports import check_value

_DTYPE_NAMES = ("float32", "float16", "bfloat16")


def resolve_dtype(dtype: Any, device: str):
    """torch dtype from None / a name / a torch.dtype; None is fp32 on CPU (half is slow there), fp16 on GPUs."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype is None:
        return torch.float32 if str(device).startswith("cpu") else torch.float16
    if dtype not in _DTYPE_NAMES:
        raise ValueError(f"dtype must be one of {_DTYPE_NAMES}, a torch.dtype or None, got {dtype!r}.")
    return getattr(torch, dtype)


def resolve_app(app: Any) -> Chain:
    """A Chain from an app name, a Chain, a chain dict, or a .json/.yaml chain file path."""
    from appflow.apps import APPS
    from appflow.chain_files import chain_from_dict, load_chain

    if isinstance(app, Chain):
        return app
    if isinstance(app, dict):
        return chain_from_dict(app)
    if isinstance(app, os.PathLike) or (isinstance(app, str) and app.endswith((".json", ".yaml", ".yml"))):
        return load_chain(app)
    if isinstance(app, str):
        return APPS.get(app)  # unknown name -> UnknownNameError listing the valid apps
    raise TypeError(f"app must be an app name, a Chain, a dict or a chain file path, got {type(app).__name__}.")


class _StepModels:
    """The `ModelAccess` a task sees: loads a role's model through the cache on first `get`."""

    def __init__(self, flow: "Appflow", step_id: str) -> None:
        self.flow, self.step_id = flow, step_id

    def get(self, role: str) -> Any:
        task = self.flow.tasks[self.step_id]
        if role not in task.models:
            raise RuntimeError(f"Task {task.name!r} asked for model role {role!r} but declares only {sorted(task.models)}; "
                               "declare it in the task's `models`.")
        source = self.flow.models[role]
        kind = MODEL_KINDS.get(self.flow.plan.model_roles[role])
        if not isinstance(source, (str, os.PathLike)):
            return source  # an object the user passed in (a loaded model, a scripted LM)
        return self.flow.cache.get(kind, source, self.flow.device, self.flow.dtype)


class Appflow:
    """One app (a validated chain of tasks) bound to its models, device and options."""

    def __init__(self, app: Any, models: list | dict | None = None, *, device: str = "cpu", dtype: Any = None,
                 cache: ModelCache | None = None, **options: Any) -> None:
        self.plan: ChainPlan = validate_chain(resolve_app(app))
        self.name = self.plan.chain.name
        if not isinstance(device, str) or not device.split(":")[0] in ("cpu", "cuda", "mps", "xpu"):
            raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N', 'mps' or 'xpu', got {device!r}.")
        self.device = device
        self.dtype = resolve_dtype(dtype, device)
        self.cache = cache if cache is not None else MODEL_CACHE
        self.tasks = {step.id: self.plan.task_classes[step.id](**step.options) for step in self.plan.order}
        for name, value in self._route_options(options).items():
            for step_id in value[1]:
                self.tasks[step_id].settings[name] = value[0]
        self.models = self._assign_models(models)

    # -- construction ------------------------------------------------------------------------
    def option_names(self) -> list[str]:
        return sorted({name for task in self.tasks.values() for name in task.options})

    def _route_options(self, options: dict[str, Any]) -> dict[str, tuple[Any, list[str]]]:
        """Each option goes to every step whose task declares it; an option nobody declares is an error."""
        routed = {}
        for name, value in options.items():
            steps = [sid for sid, task in self.tasks.items() if name in task.options]
            if not steps:
                raise TypeError(f"App {self.name!r} has no option {name!r}; its options are {self.option_names()} "
                                f"and its inputs {sorted(self.plan.app_inputs)}.")
            routed[name] = (value, steps)
        return routed

    def _assign_models(self, models: list | dict | None) -> dict[str, Any]:
        roles = list(self.plan.model_roles)
        if models is None:
            given: dict[str, Any] = {}
        elif isinstance(models, dict):
            given = dict(models)
            unknown = sorted(set(given) - set(roles))
            if unknown:
                raise ValueError(f"App {self.name!r} has no model role(s) {unknown}; its roles are {roles}.")
        elif isinstance(models, (list, tuple)):
            if len(models) > len(roles):
                raise ValueError(f"App {self.name!r} takes {len(roles)} model(s) {roles}, "
                                 f"got {len(models)}: {list(models)}.")
            given = {role: source for role, source in zip(roles, models) if source is not None}
        elif isinstance(models, (str, os.PathLike)):
            raise TypeError(f"models must be a list (one entry per role {roles}) or a dict role -> model, "
                            f"got the single string {str(models)!r}; wrap it in a list.")
        else:
            raise TypeError(f"models must be a list or a dict role -> model, got {type(models).__name__}.")
        defaults = {}
        for step in self.plan.order:
            for role, source in self.plan.task_classes[step.id].default_models.items():
                defaults.setdefault(role, source)
        defaults.update(self.plan.chain.default_models)
        assigned = {}
        for role in roles:
            source = given.get(role, defaults.get(role))
            if source is None:
                raise ValueError(f"App {self.name!r} needs a model for role {role!r} and has no default; "
                                 "pass it in `models=`.")
            kind = MODEL_KINDS.get(self.plan.model_roles[role])
            check_fit(kind, source, f"App {self.name!r}, model role {role!r}")
            assigned[role] = source
        return assigned

    # -- running -----------------------------------------------------------------------------
    def __call__(self, **kwargs: Any) -> dict[str, Any]:
        """Run the chain; keywords are app inputs (see `.inputs`) or per-call option overrides."""
        # 1. Sort keywords into inputs and options; check every input before any model loads
        inputs, overrides = {}, {}
        for name, value in kwargs.items():
            if name in self.plan.app_inputs:
                inputs[name] = value
            elif name in self.option_names():
                overrides[name] = value
            else:
                raise TypeError(f"App {self.name!r} got an unknown keyword {name!r}; "
                                f"inputs: {sorted(self.plan.app_inputs)}, options: {self.option_names()}.")
        for name, port in self.plan.app_inputs.items():
            readers = self.plan.consumers[name]
            where = f"App {self.name!r}: input {name!r} (read by step {', '.join(repr(r) for r in readers)})"
            if name not in inputs or inputs[name] is None:
                if not port.optional:
                    raise ValueError(f"{where} is required: pass {name}=<{port.type}>.")
                inputs.pop(name, None)
                continue
            inputs[name] = _coerce_input(port.type, inputs[name], where)
            check_value(port.type, inputs[name], where)

        # 2. Run the steps in dependency order
        values: dict[tuple[str | None, str], Any] = {(None, name): value for name, value in inputs.items()}
        for step in self.plan.order:
            task = self.tasks[step.id]
            step_inputs = {key: values[(b.step, b.key)] for key, b in self.plan.bindings[step.id].items()
                           if (b.step, b.key) in values}
            options = {**task.settings, **{k: v for k, v in overrides.items() if k in task.options}}
            produced = task.run(_StepModels(self, step.id), options, **step_inputs)
            for key, port_type in task.outputs.items():
                if key not in produced:
                    raise RuntimeError(f"Step {step.id!r} (task {task.name!r}) did not return its output {key!r}.")
                check_value(port_type, produced[key], f"Output {key!r} of step {step.id!r} (task {task.name!r})")
                values[(step.id, key)] = produced[key]

        # 3. Collect the named outputs, with the main one under "result"
        return {name: values[(b.step, b.key)] for name, b in self.plan.outputs.items()}

    # -- introspection and memory -------------------------------------------------------------
    @property
    def inputs(self) -> dict[str, str]:
        return {name: port.type + ("?" if port.optional else "") for name, port in self.plan.app_inputs.items()}

    @property
    def outputs(self) -> list[str]:
        return list(self.plan.outputs)

    def release(self) -> int:
        """Drop this flow's models from the cache (other flows sharing them reload on next use)."""
        return sum(self.cache.release(source) for source in self.models.values()
                   if isinstance(source, (str, os.PathLike)))

    def __repr__(self) -> str:
        return f"Appflow(app={self.name!r}, models={self.models!r}, device={self.device!r})"


def _coerce_input(port_type: str, value: Any, where: str) -> Any:
    """Image ports also take a path (str or Path) to an image file, as PaddleMIX's examples pass them, or a
    numpy array; they are read as `load_image` reads any image (upright, alpha on white, pixel cap), and a
    missing or unreadable file is an error naming the input. An "images" port takes a list of them."""
    from mixkit.io.images import load_image

    def one(item: Any) -> Any:
        if isinstance(item, (str, os.PathLike)) or type(item).__module__ == "numpy":
            try:
                return load_image(Path(item) if isinstance(item, os.PathLike) else item)
            except (OSError, ValueError, TypeError) as error:
                raise ValueError(f"{where}: {error}") from None
        return item

    if port_type == "image":
        return one(value)
    if port_type == "images" and isinstance(value, (list, tuple)):
        return [one(item) for item in value]
    return value
