"""A1111's UniPC settings (uni_pc_variant, uni_pc_skip_type, uni_pc_order, uni_pc_lower_order_final) on mixkit's
A1111UniPCScheduler.

Oracles, restated from A1111's vendored `uni_pc.py`: `get_time_steps` (linspace in t, in sqrt(t), or in
lambda(t) = log alpha_t - log sigma_t of `NoiseScheduleVP('discrete')`, whose log alpha_t is interpolated linearly
over t_j = (j + 1) / 1000), the model called at (t - 1/1000) * 1000, and `sample_multistep`'s orders: a warm-up of
orders 1 .. order - 1, then `min(order, steps + 1 - step)` with lower_order_final, else `order`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pipelines.sampler_parameters import SamplerParameters
from pipelines.samplers import make_scheduler

from .kdiffusion_reference import SD15_SCHEDULER_CONFIG, alphas_cumprod


def _unipc(steps: int, **settings):
    scheduler = make_scheduler("UniPC", SD15_SCHEDULER_CONFIG, parameters=SamplerParameters(**settings))
    scheduler.set_timesteps(steps)
    return scheduler


def _half_log_snr(t: np.ndarray, log_alphas: np.ndarray) -> np.ndarray:
    """NoiseScheduleVP.marginal_lambda, restated."""
    grid = (np.arange(len(log_alphas)) + 1) / len(log_alphas)
    log_alpha = np.interp(t, grid, log_alphas)
    return log_alpha - 0.5 * np.log(1 - np.exp(2 * log_alpha))


def test_time_quadratic_spaces_the_steps_evenly_in_sqrt_t():
    scheduler = _unipc(20, uni_pc_skip_type="time_quadratic")
    expected = (np.linspace(1.0, 0.001**0.5, 21) ** 2 - 0.001) * 1000
    np.testing.assert_allclose(scheduler.timesteps.numpy(), expected[:-1], rtol=0, atol=1e-3)
    assert float(scheduler.timesteps[0]) == pytest.approx(999.0, abs=1e-3)


def test_logsnr_spaces_the_steps_evenly_in_lambda():
    scheduler = _unipc(20, uni_pc_skip_type="logSNR")
    log_alphas = 0.5 * np.log(alphas_cumprod(SD15_SCHEDULER_CONFIG).double().numpy())
    t = np.append(scheduler.timesteps.double().numpy(), 0.0) / 1000 + 1 / 1000
    lambdas = _half_log_snr(t, log_alphas)
    steps = np.diff(lambdas)
    np.testing.assert_allclose(steps, np.full_like(steps, steps.mean()), rtol=1e-3)
    assert lambdas[0] == pytest.approx(_half_log_snr(np.array([1.0]), log_alphas)[0], abs=1e-4)
    assert lambdas[-1] == pytest.approx(_half_log_snr(np.array([0.001]), log_alphas)[0], abs=1e-4)


def test_the_skip_type_also_spaces_img2imgs_walk():
    scheduler = _unipc(20, uni_pc_skip_type="time_quadratic")
    scheduler.set_img2img_start(10)
    start = scheduler.full_grid[9] / 1000 + 1 / 1000
    expected = (np.linspace(start**0.5, 0.001**0.5, 11) ** 2 - 0.001) * 1000
    np.testing.assert_allclose(scheduler.timesteps.numpy(), expected[:-1], rtol=0, atol=1e-3)


def _orders(scheduler) -> list[int]:
    """The order of each step's predictor, driving the scheduler with a smooth fake model output."""
    sample = torch.ones(1, 1, 2, 2)
    orders = []
    for t in scheduler.timesteps:
        sample = scheduler.step(0.1 * sample * (1 + float(t) / 1000), t, sample).prev_sample
        orders.append(scheduler.this_order)
    return orders


def _a1111_orders(steps: int, order: int, lower_order_final: bool) -> list[int]:
    warm_up = list(range(1, order))
    rest = [min(order, steps + 1 - step) if lower_order_final else order for step in range(order, steps + 1)]
    return warm_up + rest


@pytest.mark.parametrize("steps, order, lower_order_final", [
    (10, 3, True), (10, 3, False), (10, 2, True), (10, 1, True), (10, 5, True), (5, 5, True), (7, 4, False),
])
def test_step_orders_are_a1111s(steps, order, lower_order_final):
    scheduler = _unipc(steps, uni_pc_order=order, uni_pc_lower_order_final=lower_order_final)
    walk = len(scheduler.timesteps)
    assert _orders(scheduler) == _a1111_orders(walk, order, lower_order_final)


def test_the_default_orders_are_unchanged():
    default = make_scheduler("UniPC", SD15_SCHEDULER_CONFIG)
    default.set_timesteps(10)
    assert _orders(default) == _a1111_orders(10, 3, True) == [1, 2, 3, 3, 3, 3, 3, 3, 2, 1]


def _a1111_vary_coeff_sample(data, x: torch.Tensor, sigmas: np.ndarray, order: int, lower_order_final: bool):
    """uni_pc's `sample(method="multistep")` with `multistep_uni_pc_vary_update` (data prediction), restated in
    float64 over grid points given by their k-diffusion sigmas; `data(x, j)` is the model's x0 at grid point j."""
    alphas = 1 / np.sqrt(sigmas**2 + 1)
    stds = sigmas * alphas
    lambdas = np.log(alphas) - np.log(stds)

    def update(x, models, points, j, step_order, use_corrector):
        s0, m0 = points[-1], models[-1]
        h = lambdas[j] - lambdas[s0]
        rks = [(lambdas[points[-(i + 1)]] - lambdas[s0]) / h for i in range(1, step_order)] + [1.0]
        diffs = [(models[-(i + 1)] - m0) / rks[i - 1] for i in range(1, step_order)]
        size = len(rks)
        c = np.array([[r**k / math.factorial(k + 1) for k in range(size)] for r in rks])
        hh = -h
        phis, phi = [], np.expm1(hh)
        for k in range(1, size + 2):
            phis.append(phi)
            phi = phi / hh - 1 / math.factorial(k)
        base = stds[j] / stds[s0] * x - alphas[j] * phis[0] * m0
        out = base
        if diffs:
            weights = np.linalg.inv(c[:-1, :-1])
            for k in range(size - 1):
                out = out - alphas[j] * phis[k + 1] * sum(w * d for w, d in zip(weights[k], diffs))
        if not use_corrector:
            return out, None
        model_t = data(out, j)
        weights = np.linalg.inv(c)
        corrected, row = base, 0
        for row in range(size - 1):
            corrected = corrected - alphas[j] * phis[row + 1] * sum(w * d for w, d in zip(weights[row][:-1], diffs))
        return corrected - alphas[j] * phis[size] * (model_t - m0) * weights[row][-1], model_t

    steps = len(sigmas) - 1
    models, points = [data(x, 0)], [0]
    for init_order in range(1, order):
        x, model = update(x, models, points, init_order, init_order, True)
        models.append(model)
        points.append(init_order)
    for step in range(order, steps + 1):
        step_order = min(order, steps + 1 - step) if lower_order_final else order
        x, model = update(x, models, points, step, step_order, step != steps)
        models, points = models[1:] + [model], points[1:] + [step]
    return x


@pytest.mark.parametrize("order, lower_order_final, skip_type", [
    (3, True, "time_uniform"), (2, True, "logSNR"), (1, True, "time_uniform"), (4, False, "time_quadratic"),
])
def test_vary_coeff_follows_uni_pcs_update(order, lower_order_final, skip_type):
    scheduler = _unipc(10, uni_pc_variant="vary_coeff", uni_pc_order=order,
                       uni_pc_lower_order_final=lower_order_final, uni_pc_skip_type=skip_type)
    sigmas = scheduler.sigmas.double().numpy()
    start = np.linspace(-1.0, 1.0, 8).reshape(1, 2, 2, 2)

    def eps(x, j):  # a smooth toy noise prediction
        return 0.6 * x + 0.2 * np.tanh(x) * (1 + 0.05 * j)

    def data(x, j):
        alpha = 1 / np.sqrt(sigmas[j] ** 2 + 1)
        return (x - sigmas[j] * alpha * eps(x, j)) / alpha

    sample = torch.from_numpy(start).float()
    for j, t in enumerate(scheduler.timesteps):
        sample = scheduler.step(torch.from_numpy(eps(sample.double().numpy(), j)).float(), t, sample).prev_sample
    expected = _a1111_vary_coeff_sample(data, start, sigmas, order, lower_order_final)
    np.testing.assert_allclose(sample.double().numpy(), expected, rtol=2e-4, atol=2e-5)
    bh1 = _unipc(10, uni_pc_order=order, uni_pc_lower_order_final=lower_order_final, uni_pc_skip_type=skip_type)
    other = torch.from_numpy(start).float()
    for j, t in enumerate(bh1.timesteps):
        other = bh1.step(torch.from_numpy(eps(other.double().numpy(), j)).float(), t, other).prev_sample
    assert not torch.allclose(other, sample, rtol=1e-3, atol=1e-4)


def test_bh2_is_another_update_than_bh1():
    bh1, bh2 = _unipc(10), _unipc(10, uni_pc_variant="bh2")
    assert bh2.config.solver_type == "bh2" and bh1.config.solver_type == "bh1"
    sample = torch.linspace(-1, 1, 4).reshape(1, 1, 2, 2)
    one, two = sample.clone(), sample.clone()
    for t in bh1.timesteps:
        one = bh1.step(0.3 * one, t, one).prev_sample
        two = bh2.step(0.3 * two, t, two).prev_sample
    assert not torch.allclose(one, two)
