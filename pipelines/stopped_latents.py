"""What a batch stopped by Interrupt or Skip decodes: the model's latest denoised estimate, as A1111 returns.

A1111's samplers keep the latest prediction of the clean image (`last_latent`) and hand it back when the user
interrupts or skips; the sample itself is still noisy then (stopped at step 5 of 20 it decodes to grain). The
pieces of the latest model call are kept as references (nothing is computed per step); the estimate is formed only
when a batch stops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipelines.inpaint_blend import evaluation_alpha


def denoised_from_output(output, model_input, alpha: float, prediction_type: str):
    """The clean-image estimate of a variance-preserving `model_input` at cumulative alpha `alpha` from the model's
    `output`: x0 = (x - sqrt(1 - a) eps) / sqrt(a) for epsilon, x0 = sqrt(a) x - sqrt(1 - a) v for v-prediction."""
    if prediction_type == "epsilon":
        return (model_input - (1.0 - alpha) ** 0.5 * output) / alpha**0.5
    if prediction_type == "v_prediction":
        return alpha**0.5 * model_input - (1.0 - alpha) ** 0.5 * output
    if prediction_type == "sample":
        return output
    raise ValueError(f"no denoised estimate for a {prediction_type!r} model; epsilon, v_prediction and sample are "
                     "supported")


@dataclass
class LastEvaluation:
    """The latest model call of a batch: per image its step output, sample, scaled model input, guided output
    and its scheduler's step index before the step; `whole_batch` when one stepper (DPM adaptive's walk) stepped
    all images at once and `outputs` holds its single output."""

    outputs: list
    samples: list
    scaled_rows: list
    guided: Any
    schedulers: list
    step_indices: list
    timestep: Any
    whole_batch: bool = False

    def denoised(self):
        """[B, C, h, w]: each image's clean-image estimate from this call (the scheduler's own where its step
        reports one, else from the guided output)."""
        import torch

        if self.whole_batch:
            return self.outputs[0].pred_original_sample
        rows = []
        for i, output in enumerate(self.outputs):
            estimate = getattr(output, "pred_original_sample", None)
            if estimate is None:
                estimate = getattr(output, "denoised", None)
            if estimate is None:
                scheduler = self.schedulers[i]
                alpha = evaluation_alpha(scheduler, self.samples[i], self.scaled_rows[i],
                                         step_index=self.step_indices[i], timestep=self.timestep)
                estimate = denoised_from_output(self.guided[i:i + 1], self.scaled_rows[i].to(self.guided), alpha,
                                                scheduler.config.prediction_type)
            rows.append(estimate.to(self.samples[i].dtype))
        return torch.cat(rows)
