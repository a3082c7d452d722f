"""Pure pieces of k-diffusion's sigma-space samplers, shared by mixkit's scheduler classes."""

from __future__ import annotations

import torch


def predicted_original(model_output: torch.Tensor, sample: torch.Tensor, sigma: torch.Tensor, prediction_type: str) -> torch.Tensor:
    """The denoised estimate D(x, sigma) from a UNet output, for sigma-space samples x."""
    if prediction_type == "epsilon":
        return sample - sigma * model_output
    if prediction_type == "v_prediction":
        return model_output * (-sigma / (sigma**2 + 1) ** 0.5) + sample / (sigma**2 + 1)
    raise ValueError(f"prediction_type {prediction_type!r} is not supported by this sampler; use 'epsilon' or 'v_prediction'")


def ancestral_split(sigma: torch.Tensor, sigma_next: torch.Tensor, eta: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(sigma_down, sigma_up) for an ancestral step from `sigma` to `sigma_next` (eta 0: plain Euler, no noise)."""
    sigma_up = torch.minimum(sigma_next, eta * (sigma_next**2 * (sigma**2 - sigma_next**2) / sigma**2).clamp(min=0).sqrt())
    sigma_down = (sigma_next**2 - sigma_up**2).clamp(min=0).sqrt()
    return sigma_down, sigma_up
