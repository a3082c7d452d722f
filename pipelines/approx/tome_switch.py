"""Changing only the ToMe ratio of a loaded pipeline between generations, and putting the model's own back.

`approximate` replaces every approximation at once. A1111's "Token merging ratio" (its `token_merging_ratio`
override, which an X/Y/Z plot sets per cell) is applied to the model before each generation; here
`set_token_merging` does the same to the loaded UNet, keeping TAESD and DeepCache as they are and the infotext's
`Token merging ratio` true, and `restore_token_merging` puts back what a `snapshot_token_merging` saw, so a plot
leaves the model as it found it, also when it fails. `token_merging_for_pass` does both around one pass: A1111's
"Token merging ratio high-res" (`token_merging_ratio_hr`), the ratio its hires fix merges at in the second pass only.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pipelines.approx.apply import check_plain_unet, tome_max_downsample
from pipelines.approx.labels import OptimizationLabels, label_infotexts, model_labels, set_model_labels
from pipelines.approx.tome_unet import (TokenMergingSettings, apply_token_merging, check_tome_ratio,
                                        remove_token_merging, token_merging_state)


@dataclass(frozen=True)
class TokenMergingSnapshot:
    """A model's ToMe install (None: off) and labels, as they were before a plot changed them."""

    model: Any
    settings: TokenMergingSettings | None
    labels: OptimizationLabels


def check_token_merging_ratios(pipe, ratios) -> None:
    """ValueError naming the value or the reason when `pipe`'s model cannot run ToMe at each of `ratios`, before any
    model changes: a ratio outside [0, 0.75], or a ratio above 0 on an int8 or compiled (OpenVINO) UNet."""
    for ratio in ratios:
        check_tome_ratio(ratio)
    if not any(ratio > 0 for ratio in ratios):
        return  # 0 is "off": every UNet takes it
    if model_labels(pipe.model).int8:
        raise ValueError("ToMe changes the UNet's attention, which this model's int8 graph has fixed; load the "
                         "checkpoint without the int8 preset to plot token merging ratios, or plot only 0.")
    check_plain_unet(pipe.model.unet)


def snapshot_token_merging(pipe) -> TokenMergingSnapshot:
    model = pipe.model
    state = token_merging_state(model.unet)
    return TokenMergingSnapshot(model, None if state is None else state.settings, model_labels(model))


def set_token_merging(pipe, ratio: float) -> None:
    """Merge `ratio` of the self-attention tokens from the next generation on (0: off), as `approximate(tome=...)`
    would, leaving the model's other approximations and their labels as they are."""
    model = pipe.model
    labels = model_labels(model)
    remove_token_merging(model.unet)
    if ratio > 0:
        apply_token_merging(model.unet, TokenMergingSettings(float(ratio), max_downsample=tome_max_downsample(model)))
    set_model_labels(model, labels.with_approximations(
        taesd=labels.taesd, deepcache=labels.deepcache, tome=float(ratio) if ratio > 0 else None, int8=labels.int8,
        int8_vae=labels.int8_vae))
    session = getattr(pipe, "session", None) or getattr(getattr(pipe, "pipe", None), "session", None)  # HiresFix
    if session is not None:
        label_infotexts(session)


def restore_token_merging(snapshot: TokenMergingSnapshot) -> None:
    """The snapshot's model with the ToMe install and labels it had when the snapshot was taken."""
    unet = snapshot.model.unet
    remove_token_merging(unet)
    if snapshot.settings is not None:
        apply_token_merging(unet, snapshot.settings)
    set_model_labels(snapshot.model, snapshot.labels)


@contextmanager
def token_merging_for_pass(pipe, ratio: float):
    """Run the body with `ratio` of `pipe`'s self-attention tokens merged, then put the model's own ToMe back (also
    when the body fails or is interrupted). 0 changes nothing: A1111's `get_token_merging_ratio(for_hr=True)` falls
    back to the first pass's ratio, which the model already runs. The caller checked `ratio`
    (`check_token_merging_ratios`)."""
    if not ratio:
        yield
        return
    snapshot = snapshot_token_merging(pipe)
    try:
        set_token_merging(pipe, ratio)
        yield
    finally:
        restore_token_merging(snapshot)
