"""The noise schedule and target a training run uses: the model's own, or the run's `prediction_type` and
`zero_terminal_snr` (kohya's --v_parameterization and --zero_terminal_snr).

Every part of a run that noises or denoises (the loss, the held-out loss, the validation images) reads the
schedule from the model's scheduler config, so the run's changes are applied once, to a copy of that config
on a copy of the model record; the caller's model is never changed. A fine-tune writes the changed config into
its output folder, so the model it writes is sampled with the schedule it was trained on.
"""

from __future__ import annotations

import dataclasses

PREDICTION_TYPES = ("epsilon", "v_prediction")
# The scheduler config keys a run may change, which a fine-tune writes into its model folder.
SCHEDULE_KEYS = ("prediction_type", "rescale_betas_zero_snr", "timestep_spacing")


def training_scheduler_config(scheduler_config: dict, prediction_type: str | None, zero_terminal_snr: bool) -> dict:
    """The model's scheduler config with the run's changes.

    `zero_terminal_snr` rescales the betas so the last timestep is pure noise (Lin et al. 2024, "Common
    diffusion noise schedules and sample steps are flawed", Algorithm 1: diffusers' rescale_betas_zero_snr),
    and samples from the last timestep ("trailing" spacing, their section 3.3), which is what lets a model
    learn to make very dark or very bright images. At zero SNR the noisy input holds nothing of the image, so
    an epsilon target is the input itself and says nothing about the image; only a v (or x0) target does
    (their section 3.2), hence the refusal below.
    """
    changed = dict(scheduler_config)
    if prediction_type is not None:
        changed["prediction_type"] = prediction_type
    if zero_terminal_snr:
        changed["rescale_betas_zero_snr"] = True
        changed["timestep_spacing"] = "trailing"
    if changed.get("rescale_betas_zero_snr") and changed.get("prediction_type", "epsilon") != "v_prediction":
        raise ValueError(
            "A zero terminal SNR schedule needs a v-prediction target: at the last timestep an epsilon model sees "
            "pure noise and can say nothing about the image (Lin et al. 2024, section 3.2). Set prediction_type: "
            "\"v_prediction\" (kohya's --v_parameterization), or leave zero_terminal_snr off.")
    return changed


def with_training_schedule(model, prediction_type: str | None, zero_terminal_snr: bool):
    """A copy of the `DiffusionModel` record (same modules) whose scheduler config is the run's."""
    config = training_scheduler_config(model.scheduler_config, prediction_type, zero_terminal_snr)
    return model if config == model.scheduler_config else dataclasses.replace(model, scheduler_config=config)
