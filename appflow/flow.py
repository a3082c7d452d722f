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
from appflow.progress import AppInterrupted, check_run_hooks, interrupted, running_with
from appflow.ports import check_value
from appflow.task import Port, rename_aliases, spread_options_dicts

def resolve_dtype(dtype: Any, device: str):
    """torch dtype from None / a name / a torch.dtype; None is fp32 on CPU (half is slow there), fp16 on GPUs.

    The names are `load_vlm`'s (one table for both entry points), short ones included: "fp16", "bf16", "fp32"."""
    import torch

    from mixkit.models.vlm.loading import DTYPES_BY_NAME

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype is None:
        return torch.float32 if str(device).startswith("cpu") else torch.float16
    if not isinstance(dtype, str) or dtype not in DTYPES_BY_NAME:
        raise ValueError(f"dtype must be one of {sorted(DTYPES_BY_NAME)}, a torch.dtype or None, got {dtype!r}.")
    return DTYPES_BY_NAME[dtype]


def check_device(device: Any) -> str:
    """`device` if this torch can use it, else ValueError saying what is available (not a bare AssertionError later):
    the model loaders' own check (`load_options.check_device`)."""
    from mixkit.models.diffusion.load_options import check_device as check_load_device

    if not isinstance(device, str):
        raise ValueError(f"device must be a string such as 'cpu', 'cuda' or 'cuda:1', got {device!r}.")
    return check_load_device(device)


def resolve_app(app: Any) -> Chain:
    """A Chain from an app name, a Chain, a chain dict, or a .json/.yaml chain file path."""
    from appflow.chain_files import chain_from_dict, load_chain

    if isinstance(app, Chain):
        return app
    if isinstance(app, dict):
        return chain_from_dict(app)
    if isinstance(app, os.PathLike) or (isinstance(app, str) and app.endswith((".json", ".yaml", ".yml"))):
        return load_chain(app)
    if isinstance(app, str):
        from appflow.apps import APPS

        return APPS.get(app)  # an app name or an alias; unknown -> UnknownNameError listing the valid apps
    raise TypeError(f"app must be an app name, a Chain, a dict or a chain file path, got {type(app).__name__}.")


class AppResult(dict):
    """An app's outputs by name; looking up one it does not have names the ones it has (and, for an output another
    project's app of that name returns, why it is not produced here) instead of a bare KeyError.

    An app input is also found by name (`result["image"]`), as PaddleMIX's examples read it
    (`applications/Automatic_label/automatic_label.py`: `plt.imshow(result["image"])`): its AppTask returns the
    inputs dict with the outputs added. The inputs are looked up, not stored: iterating, `len` and the HTTP response
    hold the outputs only, so a response never echoes the request's images back."""

    def __init__(self, chain: Chain, outputs: dict[str, Any], inputs: dict[str, Any] | None = None, *,
                 interrupted: bool = False) -> None:
        super().__init__(outputs)
        self._chain = chain
        self._inputs = dict(inputs or {})
        # Interrupt reached the run: its last SD step returned what it had made, or (AppInterrupted.partial) the
        # steps after the interrupted one never ran and only the outputs made before are here
        self.interrupted = interrupted

    def __missing__(self, key: Any) -> Any:
        why = self._chain.unavailable_outputs.get(key) if isinstance(key, str) else None
        if why is None and key in self._inputs:
            return self._inputs[key]
        reason = f" {why}" if why else ""
        raise KeyError(f"App {self._chain.name!r} has no output {key!r}.{reason} Its outputs: {sorted(self)}"
                       + (f"; its inputs, also readable by name: {sorted(self._inputs)}." if self._inputs else "."))

    def __contains__(self, key: object) -> bool:
        """`"image" in result` agrees with `result["image"]`: inputs are found too (PaddleMIX code tests with `in`)."""
        return dict.__contains__(self, key) or (isinstance(key, str) and key in self._inputs)

    def get(self, key: Any, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __reduce__(self):
        return dict, (dict(self),)  # pickles (to a worker, a cache) as the plain dict it is


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

    def extra_network_folders(self) -> dict[str, Any]:
        """The flow's LoRA, textual-inversion and hypernetwork folders (`Appflow(..., lora_dir=, embeddings_dir=,
        hypernetwork_dir=)`)."""
        return {"lora_dir": self.flow.lora_dir, "embeddings_dir": self.flow.embeddings_dir,
                "hypernetwork_dir": self.flow.hypernetwork_dir}

    def flow_state(self, key: Any, make: Any) -> Any:
        """An object kept for the flow's life (built by `make()` on first use), e.g. a prompt session on a cached model."""
        if key not in self.flow._state:
            self.flow._state[key] = make()
        return self.flow._state[key]


class Appflow:
    """One app (a validated chain of tasks) bound to its models, device and options."""

    def __init__(self, app: Any = None, models: list | dict | None = None, *, task: Any = None, device: str = "cpu",
                 dtype: Any = None, cache: ModelCache | None = None, lora_dir: str | os.PathLike | None = None,
                 embeddings_dir: str | os.PathLike | None = None, hypernetwork_dir: str | os.PathLike | None = None,
                 static_mode: bool = False, **options: Any) -> None:
        # 1. The app (PaddleMIX's README also spells it `task=`)
        if app is not None and task is not None:
            raise TypeError(f"Pass the app once: app={app!r} and task={task!r} name the same thing (task= is "
                            "PaddleMIX's spelling of app=).")
        if app is None and task is None:
            raise TypeError("Appflow needs an app: Appflow(app='text2image_generation'); `python -m appflow list` "
                            "lists them.")
        _check_static_mode(static_mode)
        from appflow.apps import app_for_models

        self.plan: ChainPlan = validate_chain(resolve_app(app_for_models(app if app is not None else task, models)))
        self.name = self.plan.chain.name
        # 2. Where it runs, checked now rather than at the first call
        self.device = check_device(device)
        self.dtype = resolve_dtype(dtype, device)
        self.cache = cache if cache is not None else MODEL_CACHE
        self.lora_dir = _check_folder("lora_dir", lora_dir)
        self.embeddings_dir = _check_folder("embeddings_dir", embeddings_dir)
        self.hypernetwork_dir = _check_folder("hypernetwork_dir", hypernetwork_dir)
        self._state: dict[Any, Any] = {}
        # 3. Options, values checked before any model loads
        self.tasks = {step.id: self.plan.task_classes[step.id](**step.options) for step in self.plan.order}
        for name, value in self._route_options(self._spread_options_dicts(options)).items():
            for step_id in value[1]:
                self.tasks[step_id].settings[name] = value[0]
        for step_id, task in self.tasks.items():
            self._check_options(step_id, task.settings)
        # 4. Models: each source checked against its role, and the options against the models (configs only)
        self.models = self._assign_models(models)
        for step_id, task in self.tasks.items():
            self._check_options_for_models(step_id, task.settings, at_call=False)

    # -- construction ------------------------------------------------------------------------
    def option_names(self) -> list[str]:
        return sorted({name for task in self.tasks.values() for name in task.options})

    def option_aliases(self) -> dict[str, str]:
        """Other accepted spellings (PaddleMIX's) of this app's options -> the option they stand for."""
        return {alias: name for task in self.tasks.values() for alias, name in task.option_aliases.items()}

    def _spread_options_dicts(self, keywords: dict[str, Any]) -> dict[str, Any]:
        return spread_options_dicts(self.name, self.tasks, keywords)

    def _canonical_options(self, options: dict[str, Any]) -> dict[str, Any]:
        return rename_aliases(options, self.option_aliases(), f"App {self.name!r}")

    def _check_options(self, step_id: str, options: dict[str, Any]) -> None:
        self._named(step_id, self.tasks[step_id].check_options, options)

    def _check_options_for_models(self, step_id: str, options: dict[str, Any], *, at_call: bool) -> None:
        task = self.tasks[step_id]
        models = {role: self.models[role] for role in task.models}
        self._named(step_id, lambda values: task.check_options_for_models(values, models, at_call=at_call), options)

    def _named(self, step_id: str, check: Any, values: dict[str, Any]) -> None:
        """Run a task's `check_options` / `check_inputs`; its error names the app and the step."""
        try:
            check(values)
        except (TypeError, ValueError) as error:
            try:  # the same exception type, so callers catching e.g. UnknownNameError still do, now naming the step
                named = type(error)(f"App {self.name!r}, step {step_id!r}: {error}")
            except Exception:  # an exception class taking other arguments: raise it unchanged
                raise error from None
            raise named from None

    def _route_options(self, options: dict[str, Any]) -> dict[str, tuple[Any, list[str]]]:
        """Each option goes to every step whose task declares it; an option nobody declares is an error."""
        routed = {}
        for name, value in self._canonical_options(options).items():
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
    def __call__(self, *, callback=None, control=None, **kwargs: Any) -> dict[str, Any]:
        """Run the chain; keywords are app inputs (see `.inputs`) or per-call option overrides.

        `callback` gets each sampling step of the chain's SD steps (`pipelines.control.StepProgress`, as a pipeline's
        `callback=`); `control` (a `GenerationControl`) interrupts: the SD step running returns what it has (as
        A1111's Interrupt), and a chain with steps left after it raises `AppInterrupted`.
        """
        hooks = check_run_hooks(callback, control)
        with running_with(hooks):
            return self._run(kwargs)

    def _run(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        # 1. Sort keywords into inputs and options; check every input and option before any model loads
        inputs, overrides = {}, {}
        aliases = self.option_aliases()
        kwargs = rename_aliases(kwargs, self.plan.chain.input_aliases, f"App {self.name!r}", "input")
        kwargs = self._spread_options_dicts(kwargs)
        for name, value in self._single_image_as_list(kwargs).items():
            if name in self.plan.app_inputs:
                inputs[name] = value
            elif name in self.option_names() or name in aliases:
                overrides[name] = value
            else:
                spellings = "".join(f", {a!r} for {target!r}" for a, target in self.plan.chain.input_aliases.items())
                raise TypeError(f"App {self.name!r} got an unknown keyword {name!r}; "
                                f"inputs: {sorted(self.plan.app_inputs)}{spellings}, options: {self.option_names()}.")
        overrides = self._canonical_options(overrides)
        per_task = {step_id: {**task.settings, **{k: v for k, v in overrides.items() if k in task.options}}
                    for step_id, task in self.tasks.items()}
        for step_id in self.tasks:
            self._check_options(step_id, per_task[step_id])
            self._check_options_for_models(step_id, per_task[step_id], at_call=True)
        for name, port in self.plan.app_inputs.items():
            readers = self.plan.consumers[name]
            where = f"App {self.name!r}: input {name!r} (read by step {', '.join(repr(r) for r in readers)})"
            if name not in inputs or inputs[name] is None:
                if not port.optional:
                    raise ValueError(f"{where} is required: pass {name}=<{port.type}>.")
                inputs.pop(name, None)
                continue
            inputs[name] = _coerce_input(port, inputs[name], where)
            _check_input(port, inputs[name], where)
        for step_id, task in self.tasks.items():
            known = {key: inputs[b.key] for key, b in self.plan.bindings[step_id].items()
                     if b.step is None and b.key in inputs}
            self._named(step_id, task.check_inputs, known)

        # 2. Run the steps in dependency order
        values: dict[tuple[str | None, str], Any] = {(None, name): value for name, value in inputs.items()}
        def stopped(where: str) -> AppInterrupted:
            made = {name: values[(b.step, b.key)] for name, b in self.plan.outputs.items() if (b.step, b.key) in values}
            return AppInterrupted(f"App {self.name!r} was interrupted {where}; "
                                  + (f"only {sorted(made)} were made" if made else "no outputs were made")
                                  + ". Run it again to finish.",
                                  partial=AppResult(self.plan.chain, made, inputs, interrupted=True))

        for number, step in enumerate(self.plan.order):
            if number and interrupted():  # the previous step stopped early: the rest would work on a partial result
                raise stopped(f"before step {step.id!r}")
            task = self.tasks[step.id]
            step_inputs = {key: values[(b.step, b.key)] for key, b in self.plan.bindings[step.id].items()
                           if (b.step, b.key) in values}
            try:
                produced = task.run(_StepModels(self, step.id), per_task[step.id], **step_inputs)
            except AppInterrupted:  # the step was stopped before it made anything to hand on
                raise stopped(f"in step {step.id!r} before it made anything") from None
            for key, port_type in task.outputs.items():
                if key not in produced:
                    raise RuntimeError(f"Step {step.id!r} (task {task.name!r}) did not return its output {key!r}.")
                check_value(port_type, produced[key], f"Output {key!r} of step {step.id!r} (task {task.name!r})")
                values[(step.id, key)] = produced[key]

        # 3. Collect the named outputs, with the main one under "result"
        return AppResult(self.plan.chain, {name: values[(b.step, b.key)] for name, b in self.plan.outputs.items()},
                         inputs, interrupted=interrupted())

    def _single_image_as_list(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """PaddleMIX passes `image=` to apps whose input here is a list `images` (dual-guided generation): take it as
        a list of one, for an app with an `images` input and no `image` input."""
        ports = self.plan.app_inputs
        if "image" not in kwargs or "image" in ports or ports.get("images", Port("")).type != "images":
            return kwargs
        if kwargs.get("images") is not None:
            raise TypeError(f"App {self.name!r} got both image= and images=; pass one image as image=, or a list as "
                            "images=.")
        kwargs = dict(kwargs)
        image = kwargs.pop("image")
        kwargs["images"] = None if image is None else [image]
        return kwargs

    # -- introspection and memory -------------------------------------------------------------
    @property
    def inputs(self) -> dict[str, str]:
        return {name: port.type + ("?" if port.optional else "") for name, port in self.plan.app_inputs.items()}

    @property
    def outputs(self) -> list[str]:
        return list(self.plan.outputs)

    def load_models(self) -> None:
        """Load every model the app names now, instead of at its first call: a command running the app over many
        inputs then reports a model that cannot load before the first input. Models passed in as objects are
        already loaded; each loaded one stays in the flow's cache, where the calls find it."""
        for role, source in self.models.items():
            if isinstance(source, (str, os.PathLike)):
                self.cache.get(MODEL_KINDS.get(self.plan.model_roles[role]), source, self.device, self.dtype)

    def release(self) -> int:
        """Drop this flow's models from the cache (other flows sharing them reload on next use)."""
        return sum(self.cache.release(source) for source in self.models.values()
                   if isinstance(source, (str, os.PathLike)))

    def __repr__(self) -> str:
        return f"Appflow(app={self.name!r}, models={self.models!r}, device={self.device!r})"


def _coerce_input(port: Port, value: Any, where: str) -> Any:
    """Image ports take a PIL image, a file path (str or Path, as PaddleMIX's examples pass them), an http(s) URL or
    a numpy array, all read alike by `read_image_input` (upright, alpha on white, pixel cap); a missing or
    unreadable file is an error naming the input. An "images" port, or an image port that batches, takes a list.
    A mask port keeps the mask's transparency (`read_mask_input`)."""
    from appflow.image_inputs import read_image_input, read_mask_input

    is_list = isinstance(value, (list, tuple))
    if port.type == "image" and port.mask and not is_list:
        return read_mask_input(value, where)
    if port.type == "image" and not is_list:
        return read_image_input(value, where)
    if is_list and (port.type == "images" or (port.type == "image" and port.batch)):
        return [read_image_input(item, f"{where}, item {index}") for index, item in enumerate(value)]
    return value


def _check_input(port: Port, value: Any, where: str) -> None:
    """`check_value` for one value, or for each item of a list given to a port that batches (at least one item)."""
    if port.batch and isinstance(value, (list, tuple)):
        if not value:
            raise ValueError(f"{where} is an empty list; pass one {port.type} or a list of at least one.")
        for index, item in enumerate(value):
            check_value(port.type, item, f"{where}, item {index}")
        return
    check_value(port.type, value, where)


def _check_static_mode(static_mode: Any) -> None:
    """PaddleMIX's `static_mode` picks Paddle's static-graph (exported) inference over eager execution. PyTorch here
    always runs eagerly, which is what `static_mode=False` asks for, so False is accepted and True refused."""
    if not isinstance(static_mode, bool):
        raise TypeError(f"static_mode must be True or False (PaddleMIX's flag), got {static_mode!r}.")
    if static_mode:
        raise ValueError("static_mode=True asks for PaddlePaddle's exported static-graph inference, which has no "
                         "counterpart here: mixkit runs PyTorch eagerly (what static_mode=False means). Drop it or pass "
                         "static_mode=False.")


_FOLDER_CONTENTS = {"lora_dir": "LoRA files", "embeddings_dir": "textual-inversion embeddings",
                    "hypernetwork_dir": "A1111 hypernetwork .pt files"}


def _check_folder(option: str, folder: str | os.PathLike | None) -> str | None:
    """A LoRA / embeddings / hypernetwork folder as given, once it is known to be an existing folder."""
    if folder is None:
        return None
    if not isinstance(folder, (str, os.PathLike)) or not str(folder).strip():
        raise TypeError(f"{option} must be a folder path (str or Path), got {folder!r}.")
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise ValueError(f"{option} {str(folder)!r} is not an existing folder; create it or pass the folder that holds "
                         f"your {_FOLDER_CONTENTS[option]}.")
    return str(path)
