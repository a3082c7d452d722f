"""The X/Y/Z plot axes that change the loaded model rather than the call's params: VAE, Token merging ratio and FP8
mode.

A1111 applies them per generation (`sd_vae`, `token_merging_ratio` and `fp8_storage` overrides; FP8 by reloading the
weights). Here each is an axis whose `switch(pipe, value, context, restorer)` runs before a cell whose value differs
from the previous cell's and returns the pipeline to generate with; the plot switches the costlier axes first (a
checkpoint, then its FP8 storage, its VAE, then ToMe) and re-applies the cheaper ones after a costlier one switched,
since a new checkpoint comes with its own weights, its own VAE and no ToMe. What a switch changes on a model is recorded in the plot's `ModelRestorer` and put back when the plot
ends, also when it fails; the VAE is the caller's to put back (the server and the CLI do, as the server does its
checkpoint).

FP8 mode stores the UNet's and text encoders' linear and convolution weights as float8_e4m3fn
(`mixkit.runtime.fp8_storage`) in the cells whose value enables it for the model ("Enable"; "Enable for SDXL" on an
SDXL model), keeping the model's own tensors to put back bit for bit; the plot's refiner, if any, keeps its weights.

Values are read as A1111 1.10's `find_vae` reads them ("auto"/"automatic" and "none" in any case, else a VAE
name in any case), except that an unknown name is refused before anything runs (A1111 prints a note and decodes
with Automatic).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from pipelines.scripts.xyz_axes import PlotContext

AUTOMATIC, NONE = "Automatic", "None"


class ModelRestorer:
    """What a plot changed on loaded models, as one undo per model and setting, run (newest first) by `restore`."""

    def __init__(self) -> None:
        self._undo: dict[Any, Callable[[], None]] = {}

    def remember(self, key: Any, undo: Callable[[], None]) -> None:
        """`undo` puts back what `key` (a model and a setting) was before its first change; later ones are ignored."""
        self._undo.setdefault(key, undo)

    def restore(self) -> None:
        for undo in reversed(list(self._undo.values())):
            undo()
        self._undo.clear()


def vae_choices(context: "PlotContext") -> list[str]:
    """A1111's: "Automatic", "None", then the VAEs the caller lists (the server's `--vae-dir`)."""
    return [AUTOMATIC, NONE, *(name for name in context.vae_names if name not in (AUTOMATIC, NONE))]


def find_vae_name(context: "PlotContext", value: Any) -> str | None:
    """The VAE name `value` means (A1111's `find_vae`, a name matched in any case); None when none is listed."""
    folded = str(value).strip().casefold()
    if folded in ("auto", "automatic"):
        return AUTOMATIC
    if folded == "none":
        return NONE
    return next((name for name in context.vae_names if name.casefold() == folded), None)


def check_vaes(params, values, context: "PlotContext") -> None:
    if context.switch_vae is None:
        raise ValueError("The VAE axis needs a way to swap the loaded model's VAE, which this caller did not give "
                         "(the Python API: pass switch_vae=callable(name) -> pipeline and vae_names=[...]); run the "
                         "plot from the web UI, the HTTP API or the CLI (with --vae-dir), or choose another axis.")
    unknown = [value for value in values if find_vae_name(context, value) is None]
    if unknown:
        valid = ", ".join(repr(name) for name in vae_choices(context))
        raise ValueError(f"Unknown VAE {unknown[0]!r} on the VAE axis. Valid names: {valid} (the VAE files and "
                         "folders listed are --vae-dir's).")


def switch_vae(pipe, value, context: "PlotContext", restorer: ModelRestorer):
    """The caller's pipeline decoding with VAE `value`; a file removed or broken since the check fails here."""
    name = find_vae_name(context, value) or str(value)
    try:
        return context.switch_vae(name)
    except (ValueError, LookupError, OSError, RuntimeError) as error:
        raise ValueError(f"the VAE axis could not load {name!r} ({error}); was it removed or changed, or made for "
                         "another model family? Refresh the VAE list and plot again.") from error


def _merging(values) -> str:
    """The ratios that merge tokens (above 0), as the plot's cells show them: "0.3, 0.5"."""
    return ", ".join(str(value) for value in values if value > 0)


def check_token_merging_values(params, values, context: "PlotContext", label: str = "Token merging ratio",
                               zero: str = "0 turns it off") -> None:
    """Every ratio in ToMe's range, and none above 0 when the caller knows the UNet's graph will be fixed
    (`context.fixed_unet`: the CLI's --int8 or --backend), before anything loads or runs. Whether a loaded model can
    merge is checked on its pipeline, by `check_token_merging_pipe`. `label` / `zero`: the axis's name and what its 0
    means (the high-res axis shares this check)."""
    from pipelines.approx.tome_unet import check_tome_ratio

    for value in values:
        try:
            check_tome_ratio(value)
        except ValueError as error:
            raise ValueError(f"{label} {value!r}: {error}; {zero}.") from None
    if context.fixed_unet and any(value > 0 for value in values):
        raise ValueError(f"{label} {_merging(values)}: ToMe changes the UNet's attention, but "
                         f"{context.fixed_unet}; plot only 0, or leave that out.")


def check_token_merging_pipe(pipe, values, label: str = "Token merging ratio") -> None:
    """Whether `pipe`'s model can merge tokens at each ratio (not on an int8 or OpenVINO UNet), before it changes."""
    from pipelines.approx.tome_switch import check_token_merging_ratios

    try:
        check_token_merging_ratios(pipe, values)
    except ValueError as error:
        raise ValueError(f"{label} {_merging(values)}: {error}") from None


def switch_token_merging(pipe, value, context: "PlotContext", restorer: ModelRestorer):
    """`pipe` with `value` of its self-attention tokens merged (0: off), its model's own ToMe put back at the end."""
    from pipelines.approx.tome_switch import restore_token_merging, set_token_merging, snapshot_token_merging

    snapshot = snapshot_token_merging(pipe)
    restorer.remember((id(pipe.model), "tome"), lambda: restore_token_merging(snapshot))
    set_token_merging(pipe, value)
    return pipe


# A1111's "FP8 mode" axis sets its `fp8_storage` option per cell; these are that option's values, in its order.
FP8_MODES = ("Disable", "Enable for SDXL", "Enable")
_FP8_ATTRIBUTE = "_mixkit_fp8_storage"  # on the UNet: the `Fp8Storage` a plot installed, until it is removed


def fp8_choices(context: "PlotContext") -> list[str]:
    return list(FP8_MODES)


def find_fp8_mode(value: Any) -> str | None:
    """The FP8 mode `value` names, in any case ("enable" is "Enable"); None when it names none."""
    folded = str(value).strip().casefold()
    return next((mode for mode in FP8_MODES if mode.casefold() == folded), None)


def _fp8_on(model, value: Any) -> bool:
    """A1111's `check_fp8`: "Enable" always, "Enable for SDXL" on an SDXL model (base or refiner)."""
    mode = find_fp8_mode(value)
    return mode == "Enable" or (mode == "Enable for SDXL" and model.family.uses_pooled_text)


def check_fp8_values(params, values, context: "PlotContext") -> None:
    """Every value one of A1111's modes, and no enabling one when this torch has no FP8 dtype or the caller knows the
    UNet's graph will be fixed (`context.fixed_unet`), before anything loads or runs."""
    from mixkit.runtime.fp8_storage import fp8_storage_problem

    unknown = [value for value in values if find_fp8_mode(value) is None]
    if unknown:
        raise ValueError(f"FP8 mode {unknown[0]!r} is not one of {', '.join(map(repr, FP8_MODES))}.")
    enabling = ", ".join(str(value) for value in values if find_fp8_mode(value) != "Disable")
    if enabling and context.fixed_unet:
        raise ValueError(f"FP8 mode {enabling}: FP8 storage changes the UNet's layers, but {context.fixed_unet}; "
                         "plot only Disable, or leave that out.")
    problem = fp8_storage_problem([]) if enabling else None
    if problem:
        raise ValueError(f"FP8 mode {enabling}: {problem}; plot only Disable.")


def _fp8_parts(model) -> list:
    """What A1111 stores as FP8: everything but the VAE (the UNet and the text encoders)."""
    return [model.unet, *model.text_encoders]


def check_fp8_pipe(pipe, values) -> None:
    """Whether `pipe`'s model can store FP8 weights for the values that enable it (not an int8, OpenVINO or compiled
    UNet; a device torch converts FP8 on), before it changes."""
    from diffusers import UNet2DConditionModel

    from mixkit.runtime.fp8_storage import fp8_storage_problem
    from pipelines.approx.labels import model_labels

    model = pipe.model
    enabling = ", ".join(str(value) for value in values if _fp8_on(model, value))
    if not enabling:
        return  # "Disable", or "Enable for SDXL" on an SD 1.x / 2.x model: nothing changes
    unet = model.unet
    if model_labels(model).int8:
        problem = "this model's UNet is an int8 graph, whose weights are not floats to store as FP8"
    elif not isinstance(unet, UNet2DConditionModel) or "_mixkit_eager_forward" in unet.__dict__:
        problem = (f"this model's UNet is a compiled graph ({type(unet).__name__}), which keeps the weights it was "
                   "compiled with")
    else:
        problem = fp8_storage_problem(_fp8_parts(model))
    if problem:
        raise ValueError(f"FP8 mode {enabling}: {problem}; plot only Disable, or load the model without that.")


def _fp8_off(model) -> None:
    from mixkit.runtime.fp8_storage import FP8_WEIGHT_EXTRA, restore_fp8

    storage = model.unet.__dict__.pop(_FP8_ATTRIBUTE, None)
    if storage is not None:
        restore_fp8(storage)
    model.extras.pop(FP8_WEIGHT_EXTRA, None)


def switch_fp8(pipe, value, context: "PlotContext", restorer: ModelRestorer):
    """`pipe` with its model's UNet and text encoders storing FP8 weights when `value` enables it for this model, and
    its own weights back (bit for bit) when it does not, and when the plot ends."""
    from mixkit.runtime.fp8_storage import FP8_WEIGHT_EXTRA, store_fp8

    model = pipe.model
    installed = _FP8_ATTRIBUTE in model.unet.__dict__
    if _fp8_on(model, value) and not installed:
        restorer.remember((id(model), "fp8"), lambda: _fp8_off(model))
        model.unet.__dict__[_FP8_ATTRIBUTE] = store_fp8(_fp8_parts(model))
    elif not _fp8_on(model, value) and installed:
        _fp8_off(model)
    if _fp8_on(model, value):  # the infotext's `FP8 weight`: the cell's mode ("Enable for SDXL" as written)
        model.extras[FP8_WEIGHT_EXTRA] = find_fp8_mode(value)
    return pipe
