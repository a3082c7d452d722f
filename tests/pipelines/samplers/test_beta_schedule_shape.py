"""A1111's Beta schedule with its settings beta_dist_alpha / beta_dist_beta (sd_schedulers.beta_scheduler).

Oracle, restated: timesteps 1 - linspace(0, 1, n), each mapped through scipy's `beta.ppf(x, alpha, beta)`, spread
linearly between the model's sigma_min and sigma_max (or A1111's "Schedule min/max sigma"), then 0.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pipelines.sampler_parameters import SamplerParameters
from pipelines.samplers import make_scheduler

from .kdiffusion_reference import SD15_SCHEDULER_CONFIG, training_sigmas


def _a1111_beta(n: int, alpha: float, beta: float, sigma_min: float, sigma_max: float) -> np.ndarray:
    sigmas = [sigma_min + stats.beta.ppf(x, alpha, beta) * (sigma_max - sigma_min) for x in 1 - np.linspace(0, 1, n)]
    return np.array(sigmas + [0.0])


@pytest.mark.parametrize("sampler", ["Euler", "DPM++ 2M", "Heun"])
@pytest.mark.parametrize("alpha, beta", [(0.3, 0.9), (1.0, 1.0), (0.6, 0.2)])
def test_the_walk_is_a1111s_beta_quantiles_for_any_shape(sampler, alpha, beta):
    parameters = SamplerParameters(beta_dist_alpha=alpha, beta_dist_beta=beta)
    scheduler = make_scheduler(sampler, SD15_SCHEDULER_CONFIG, "Beta", parameters=parameters)
    scheduler.set_timesteps(12)
    model = training_sigmas(SD15_SCHEDULER_CONFIG).numpy()
    expected = _a1111_beta(12, alpha, beta, float(model[0]), float(model[-1]))
    walked = scheduler.sigmas.numpy()
    if sampler == "Heun":  # second-order: every sigma but the first listed twice
        walked = np.concatenate([walked[:1], walked[1:-1:2], walked[-1:]])
    np.testing.assert_allclose(walked, expected, rtol=1e-5, atol=1e-6)


def test_the_shape_and_the_bounds_combine():
    parameters = SamplerParameters(beta_dist_alpha=0.4, beta_dist_beta=0.7, sigma_min=0.1, sigma_max=10.0)
    scheduler = make_scheduler("Euler", SD15_SCHEDULER_CONFIG, "Beta", parameters=parameters)
    scheduler.set_timesteps(8)
    np.testing.assert_allclose(scheduler.sigmas.numpy(), _a1111_beta(8, 0.4, 0.7, 0.1, 10.0), rtol=1e-5, atol=1e-6)


def test_the_default_shape_runs_the_scheduler_that_ran_before():
    plain = make_scheduler("Euler", SD15_SCHEDULER_CONFIG, "Beta")
    default = make_scheduler("Euler", SD15_SCHEDULER_CONFIG, "Beta",
                             parameters=SamplerParameters(beta_dist_alpha=0.6, beta_dist_beta=0.6))
    assert type(plain) is type(default)
