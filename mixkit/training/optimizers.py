"""Optimizers by name for the SD trainers (kohya's `optimizer_type` set); their schedules are `lr_schedules`.

8-bit AdamW (Dettmers et al. 2022, block-wise quantised optimizer states) keeps both Adam moments
in one byte per value instead of four, which is what lets people fine-tune SDXL on consumer GPUs.
bitsandbytes keeps tensors under `min_8bit_size` values (4096 by default) in 32-bit state.
Lion (`mixkit.training.lion`) keeps one moment and moves every weight by the rate; Prodigy (Mishchenko &
Defazio 2024, the `prodigyopt` package) estimates the step size itself, so it runs at a learning rate
of about 1.0 (a multiplier on its estimate); Adafactor (transformers') factors the second moment into
row and column statistics, the memory-light choice for full fine-tunes.
"""

from __future__ import annotations

import logging
import warnings
from typing import Callable

import torch

from mixkit.registry import Registry

logger = logging.getLogger(__name__)

WEIGHT_DECAY = 1e-2  # torch's and kohya's AdamW default

# Each factory takes the parameter groups, the rate and keyword overrides of its constructor's settings (kohya's
# --optimizer_args: weight_decay=0.1, betas=(0.9, 0.99), d_coef=2 ...), which win over mixkit's defaults.
OPTIMIZERS: Registry[Callable[..., torch.optim.Optimizer]] = Registry("optimizer")


@OPTIMIZERS.register("adamw")
def make_adamw(parameter_groups: list, learning_rate: float, **options) -> torch.optim.Optimizer:
    # torch's default on CPU updates parameter by parameter; the fused kernel does all of them in one call
    # (336 LoRA tensors of mixkit-tiny-sd: 10 ms -> 1.5 ms a step). It needs float tensors on CPU or CUDA.
    groups = [{**group, "params": list(group["params"])} for group in parameter_groups]
    fusable = all(p.device.type in ("cpu", "cuda") and p.dtype.is_floating_point for g in groups for p in g["params"])
    return torch.optim.AdamW(groups, **{"lr": learning_rate, "weight_decay": WEIGHT_DECAY,
                                        "fused": True if fusable else None, **options})


def _optional_package(module: str, optimizer: str, install: str):
    """The optimizer's package, or an ImportError that says which one to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(f"optimizer={optimizer!r} needs the {install} package: pip install {install} (or pip install "
                          f"'mixkit[train]', or use optimizer='adamw'); import failed with: {error}") from None


@OPTIMIZERS.register("adamw8bit")
def make_adamw_8bit(parameter_groups: list, learning_rate: float, **options) -> torch.optim.Optimizer:
    bitsandbytes = _optional_package("bitsandbytes", "adamw8bit", "bitsandbytes")
    return bitsandbytes.optim.AdamW8bit(parameter_groups, **{"lr": learning_rate, "weight_decay": WEIGHT_DECAY,
                                                              **options})


@OPTIMIZERS.register("lion")
def make_lion(parameter_groups: list, learning_rate: float, **options) -> torch.optim.Optimizer:
    from mixkit.training.lion import Lion

    # Decay 10x AdamW's: Lion runs at a ~10x lower rate and scales the decay by it (the paper's advice).
    return Lion(parameter_groups, **{"lr": learning_rate, "weight_decay": 10 * WEIGHT_DECAY, **options})


@OPTIMIZERS.register("prodigy")
def make_prodigy(parameter_groups: list, learning_rate: float, **options) -> torch.optim.Optimizer:
    prodigy = _optional_package("prodigyopt", "prodigy", "prodigyopt")
    rates = [group.get("lr", learning_rate) for group in parameter_groups] or [learning_rate]
    if max(rates) <= 0.1:
        # kohya warns the same way: Prodigy's rate multiplies its own step-size estimate.
        warnings.warn(f"optimizer='prodigy' with learning rate {max(rates)}: Prodigy finds the step size itself and "
                      "expects a rate of about 1.0 (a multiplier on its estimate); at this rate it barely moves",
                      UserWarning, stacklevel=3)
    # Bias correction and the warm-up safeguard: the settings Prodigy's authors suggest for diffusion models.
    return prodigy.Prodigy(parameter_groups, **{"lr": learning_rate, "weight_decay": WEIGHT_DECAY, "decouple": True,
                                                "use_bias_correction": True, "safeguard_warmup": True, **options})


@OPTIMIZERS.register("adafactor")
def make_adafactor(parameter_groups: list, learning_rate: float, **options) -> torch.optim.Optimizer:
    from transformers.optimization import Adafactor

    # kohya's defaults: settings optimizer_args leave out are transformers' own (scale_parameter=True,
    # warmup_init=False, weight_decay=0), relative_step included, which kohya sets to True when not given. For
    # Adafactor at the given rate, say so: "scale_parameter=False relative_step=False warmup_init=False" (kohya's
    # and kohya_ss's advice).
    settings = {"lr": learning_rate, **options}
    if relative_step_adafactor(options):
        # Adafactor's own step size (min(1e-2, 1/sqrt(step)), or 1e-6 * step with warmup_init, times the weights' RMS
        # with scale_parameter) replaces the rates, as in kohya, which drops them (unet_lr and text_encoder_lr too),
        # keeps learning_rate as the schedule's initial_lr (the rate reported before the first step) and runs
        # lr_scheduler "adafactor".
        rates = sorted({group["lr"] for group in parameter_groups if group.get("lr") is not None} | {learning_rate})
        if any(rates):
            warnings.warn(f"optimizer='adafactor' picks its own step size (relative_step, kohya's default for it): the "
                          f"learning rates {rates} only start the reported rate, as kohya's initial_lr; set "
                          "optimizer_args relative_step=False (and scale_parameter=False) to train at learning_rate",
                          UserWarning, stacklevel=3)
        settings.update(lr=None, relative_step=True)
        parameter_groups = [{key: value for key, value in group.items() if key != "lr"} for group in parameter_groups]
    return Adafactor(parameter_groups, **settings)


def relative_step_adafactor(options: dict) -> bool:
    """Whether Adafactor settings make it pick its own step size: relative_step unless set false (kohya's default),
    or warmup_init, which kohya turns relative_step on for ("set relative_step to True because warmup_init is True")."""
    return bool(options.get("relative_step", True) or options.get("warmup_init"))


def make_optimizer(name: str, parameter_groups: list, learning_rate: float,
                   options: dict | None = None) -> torch.optim.Optimizer:
    """The optimizer registered as `name` over `parameter_groups` (dicts with "params" and optional "lr"), with
    `options` (`check_optimizer_args`) over its constructor's settings."""
    return OPTIMIZERS.get(name)(parameter_groups, learning_rate, **(options or {}))


def check_optimizer_args(name: str, options: dict, learning_rate: float) -> None:
    """Refuse `options` the optimizer `name` does not take, or values its constructor rejects, before any model
    loads: the optimizer is built once over a throw-away parameter, so the check is the constructor's own."""
    import inspect

    if not isinstance(options, dict) or not all(isinstance(key, str) for key in options):
        raise TypeError(f"optimizer_args must map setting names to values (kohya's list [\"weight_decay=0.1\"] is "
                        f"translated to one), got {options!r}")
    if "lr" in options:
        raise ValueError("optimizer_args must not set lr: the rate is learning_rate (and text_encoder_learning_rate)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Prodigy's low-rate warning comes with the real run
        plain = make_optimizer(name, [{"params": [torch.nn.Parameter(torch.zeros(1))]}], learning_rate)
        accepted = [key for key in inspect.signature(type(plain).__init__).parameters
                    if key not in ("self", "params", "lr", "args", "kwargs")]
        unknown = sorted(set(options) - set(accepted))
        if unknown:
            raise ValueError(f"optimizer_args {unknown} are not settings of optimizer={name!r} "
                             f"({type(plain).__name__}); it takes {accepted}")
        try:
            make_optimizer(name, [{"params": [torch.nn.Parameter(torch.zeros(1))]}], learning_rate, options)
        except (TypeError, ValueError) as error:
            raise ValueError(f"optimizer_args {options!r} for optimizer={name!r}: {error}") from None


# Constructor switches that choose a kernel, not the optimisation: left out of `optimizer_description`.
IMPLEMENTATION_SWITCHES = ("lr", "fused", "foreach", "capturable", "differentiable")


def optimizer_description(optimizer: torch.optim.Optimizer) -> str:
    """kohya's `ss_optimizer`: the class's full name, followed in brackets by the settings that differ from the
    class's own defaults, as kohya writes its --optimizer_args ("mixkit.training.lion.Lion(weight_decay=0.1)")."""
    import inspect

    cls = type(optimizer)
    name = f"{cls.__module__}.{cls.__name__}"
    try:
        parameters = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):  # a compiled class without a signature: its name alone
        return name
    changed = [f"{key}={value}" for key, value in optimizer.defaults.items()
               if key not in IMPLEMENTATION_SWITCHES and key in parameters
               and parameters[key].default is not inspect.Parameter.empty and parameters[key].default != value]
    return f"{name}({','.join(changed)})" if changed else name
