"""A1111 1.10's sigma schedules that diffusers has no switch for, as pure functions.

Each takes the step count `n` and the model's training sigmas (ascending, sigma(t=0) first, as
k-diffusion's `DiscreteSchedule.sigmas`) and returns the whole schedule the sampler walks,
*including* its last entry: 0 for most, sigma_min for "KL Optimal", which A1111 ends there
(its `kl_optimal` returns n + 1 sigmas from sigma_max down to sigma_min, no zero appended).
The formulas follow A1111's `modules/sd_schedulers.py`; the references are in each docstring.

A1111's own four (Uniform, Karras, Exponential, SGM Uniform) are here too, although diffusers has
switches for them: diffusers derives them from its interpolated timestep grid, which at one step
collapses to t = 0 (a one-step "Karras" run started at sigma_min and returned the noise), and
interpolates sigma linearly where k-diffusion interpolates log sigma. "Polyexponential" at
A1111's default rho = 1 is "Exponential"; "Normal" (linspace from t(sigma_max) to t(sigma_min))
is "Uniform".

The schedules that A1111 builds from a sigma range (Karras, Exponential, Polyexponential, SGM Uniform,
KL Optimal, Normal, Beta) take `sigma_min` / `sigma_max` keywords, its "Schedule min/max sigma" settings, and
Karras and Polyexponential a `rho`, Beta its distribution's `alpha` / `beta`; left out, the model's range and the schedule's own rho are used by exactly
the code that ran before these settings existed.
"""

from __future__ import annotations

import numpy as np

# Align Your Steps (Sabour et al. 2024): NVIDIA's 11 sigmas for SD 1.5 and SDXL, as published on
# the project page and used by A1111 as they are at 11 steps (then 0); other step counts
# interpolate them in log sigma.
ALIGN_YOUR_STEPS_SD15 = (14.615, 6.475, 3.861, 2.697, 1.886, 1.396, 0.963, 0.652, 0.399, 0.152, 0.029)
ALIGN_YOUR_STEPS_SDXL = (14.615, 6.315, 3.771, 2.181, 1.342, 0.862, 0.555, 0.380, 0.234, 0.113, 0.029)

# A1111's defaults for its "Beta" schedule (settings beta_dist_alpha / beta_dist_beta), the values
# Lee et al. 2024 ("Beta Sampling is All You Need") recommend.
BETA_ALPHA = 0.6
BETA_BETA = 0.6


def _sigma_at(timesteps: np.ndarray, training_sigmas: np.ndarray) -> np.ndarray:
    """k-diffusion's `t_to_sigma`: log sigma interpolated linearly between integer timesteps."""
    return np.exp(np.interp(timesteps, np.arange(len(training_sigmas)), np.log(training_sigmas)))


def _range(training_sigmas: np.ndarray, sigma_min: float | None, sigma_max: float | None) -> tuple[float, float]:
    """(sigma_min, sigma_max): A1111's settings where given, else the training schedule's ends."""
    low = training_sigmas[0] if sigma_min is None else sigma_min
    high = training_sigmas[-1] if sigma_max is None else sigma_max
    return low, high


def timestep_at(sigma: float, training_sigmas: np.ndarray) -> float:
    """k-diffusion's `sigma_to_t` (unquantized): the timestep, linear in log sigma, clamped to the training range."""
    return float(np.interp(np.log(sigma), np.log(training_sigmas), np.arange(len(training_sigmas))))


def _timestep_range(training_sigmas: np.ndarray, sigma_min: float | None, sigma_max: float | None) -> tuple[float, float]:
    """(t(sigma_max), t(sigma_min)) as A1111's `sgm_uniform` / `normal` take them; the training ends are 999 and 0."""
    start = len(training_sigmas) - 1 if sigma_max is None else timestep_at(sigma_max, training_sigmas)
    end = 0 if sigma_min is None else timestep_at(sigma_min, training_sigmas)
    return start, end


def uniform_sigmas(n: int, training_sigmas: np.ndarray, sdxl: bool = False) -> np.ndarray:
    """k-diffusion's `DiscreteSchedule.get_sigmas`: timesteps linspace(999, 0, n), then 0."""
    last = len(training_sigmas) - 1
    return np.append(_sigma_at(np.linspace(last, 0, n), training_sigmas), 0.0)


def normal_sigmas(n: int, training_sigmas: np.ndarray, sdxl: bool = False, sigma_min: float | None = None,
                  sigma_max: float | None = None) -> np.ndarray:
    """A1111's `normal_scheduler`: timesteps linspace(t(sigma_max), t(sigma_min), n), then 0 ("Uniform" at the
    model's own range)."""
    if sigma_min is None and sigma_max is None:
        return uniform_sigmas(n, training_sigmas, sdxl)
    start, end = _timestep_range(training_sigmas, sigma_min, sigma_max)
    return np.append(_sigma_at(np.linspace(start, end, n), training_sigmas), 0.0)


def sgm_uniform_sigmas(n: int, training_sigmas: np.ndarray, sdxl: bool = False, sigma_min: float | None = None,
                       sigma_max: float | None = None) -> np.ndarray:
    """A1111's `sgm_uniform`: n of n + 1 evenly spaced timesteps from t(sigma_max) (999) to t(sigma_min) (0), the
    last dropped."""
    start, end = _timestep_range(training_sigmas, sigma_min, sigma_max)
    return np.append(_sigma_at(np.linspace(start, end, n + 1)[:-1], training_sigmas), 0.0)


def karras_sigmas(n: int, training_sigmas: np.ndarray, sdxl: bool = False, rho: float = 7.0,
                  sigma_min: float | None = None, sigma_max: float | None = None) -> np.ndarray:
    """Karras et al. 2022, eq. 5 (rho = 7) between the training schedule's sigma_max and sigma_min."""
    sigma_min, sigma_max = _range(training_sigmas, sigma_min, sigma_max)
    low, high = sigma_min ** (1 / rho), sigma_max ** (1 / rho)
    return np.append((high + np.linspace(0, 1, n) * (low - high)) ** rho, 0.0)


def exponential_sigmas(n: int, training_sigmas: np.ndarray, sdxl: bool = False, sigma_min: float | None = None,
                       sigma_max: float | None = None) -> np.ndarray:
    """Sigmas evenly spaced in log sigma from sigma_max to sigma_min."""
    sigma_min, sigma_max = _range(training_sigmas, sigma_min, sigma_max)
    return np.append(np.exp(np.linspace(np.log(sigma_max), np.log(sigma_min), n)), 0.0)


def polyexponential_sigmas(n: int, training_sigmas: np.ndarray, sdxl: bool = False, rho: float | None = None,
                           sigma_min: float | None = None, sigma_max: float | None = None) -> np.ndarray:
    """k-diffusion's `get_sigmas_polyexponential`: log sigma = ramp**rho between log sigma_max and log sigma_min,
    ramp from 1 to 0; at A1111's default rho = 1 (None here) the exponential schedule."""
    if rho is None:
        return exponential_sigmas(n, training_sigmas, sdxl, sigma_min, sigma_max)
    sigma_min, sigma_max = _range(training_sigmas, sigma_min, sigma_max)
    ramp = np.linspace(1, 0, n) ** rho
    return np.append(np.exp(ramp * (np.log(sigma_max) - np.log(sigma_min)) + np.log(sigma_min)), 0.0)


def kl_optimal_sigmas(n: int, training_sigmas: np.ndarray, sdxl: bool = False, sigma_min: float | None = None,
                      sigma_max: float | None = None) -> np.ndarray:
    """KL-optimal schedule (Sabour et al. 2024, eq. 9): uniform in arctan(sigma), sigma_max to sigma_min."""
    sigma_min, sigma_max = _range(training_sigmas, sigma_min, sigma_max)
    low, high = np.arctan(sigma_min), np.arctan(sigma_max)
    fraction = np.arange(n + 1) / n
    return np.tan(fraction * low + (1.0 - fraction) * high)


def align_your_steps_sigmas(n: int, training_sigmas: np.ndarray, sdxl: bool = False) -> np.ndarray:
    """NVIDIA's Align Your Steps sigmas for the model family, log-linearly resampled unless `n` is 11."""
    published = np.array(ALIGN_YOUR_STEPS_SDXL if sdxl else ALIGN_YOUR_STEPS_SD15)
    if n != len(published):
        # Interpolate log sigma over a uniform grid, from sigma_min upwards, as the AYS how-to does.
        ascending_logs = np.log(published[::-1])
        grid = np.linspace(0, 1, len(published))
        published = np.exp(np.interp(np.linspace(0, 1, n), grid, ascending_logs))[::-1]
    return np.append(published, 0.0)


def simple_sigmas(n: int, training_sigmas: np.ndarray, sdxl: bool = False) -> np.ndarray:
    """ComfyUI's "simple": every (1000 / n)-th training sigma from the top, truncated to an index."""
    stride = len(training_sigmas) / n
    picked = [training_sigmas[-(1 + int(step * stride))] for step in range(n)]
    return np.append(np.array(picked, dtype=np.float64), 0.0)


def ddim_sigmas(n: int, training_sigmas: np.ndarray, sdxl: bool = False) -> np.ndarray:
    """The training sigmas at timesteps 1, 1 + k, 1 + 2k, ... (k = 1000 // n), top first.

    As A1111's DDIM schedule this can walk more than `n` steps when 1000 is not a multiple of
    `n` (30 steps: k = 33, 31 sigmas); the sampler runs them all, as A1111 does.
    """
    stride = max(len(training_sigmas) // n, 1)
    picked = training_sigmas[1::stride][::-1]
    return np.append(np.array(picked, dtype=np.float64), 0.0)


def beta_sigmas(n: int, training_sigmas: np.ndarray, sdxl: bool = False, sigma_min: float | None = None,
                sigma_max: float | None = None, alpha: float = BETA_ALPHA, beta: float = BETA_BETA) -> np.ndarray:
    """Beta(alpha, beta) quantiles spread linearly between sigma_min and sigma_max (A1111's "Beta"; its settings
    beta_dist_alpha / beta_dist_beta, 0.6 each by default)."""
    from scipy import stats

    sigma_min, sigma_max = (float(end) for end in _range(training_sigmas, sigma_min, sigma_max))
    quantiles = stats.beta.ppf(1.0 - np.linspace(0, 1, n), alpha, beta)
    return np.append(sigma_min + quantiles * (sigma_max - sigma_min), 0.0)
