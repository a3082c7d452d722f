"""A1111's "DPM adaptive" (k-diffusion `sample_dpm_adaptive`: DPM-Solver-23 with adaptive step size, Lu et al. 2022).

Each attempt from t = -log sigma to t + h computes a second- and a third-order DPM-Solver estimate from the same three
model calls (at t, t + h/3, t + 2h/3); their difference, scaled by rtol/atol, is the error a PID controller turns into
the next h, rejecting the attempt (and calling the model again from the same place with a smaller h) when it is too
large. With eta (A1111 passes its "Eta" setting, 1 by default) an accepted step aims at k-diffusion's ancestral
sigma_down and adds noise of std s_noise * sigma_up from the image's generator; the controller then assumes order
1.5. The walk ends *at* sigma_min. A1111 passes no other option, so rtol, atol, h_init and the PID coefficients are
k-diffusion's defaults; the step count only sets the sigma range (as for "DPM fast", dpm_fast.py).

Where the model is called depends on the sample, so the calls cannot be planned ahead: `DPMAdaptiveWalk` asks for
them one at a time, and the scheduler lists only the first in `timesteps`; loops iterate `model_call_timesteps`.
The error is measured over the whole batch the walk holds, as k-diffusion measures it: A1111's batch of images shares
one step-size controller, and so does mixkit's pipeline (it steps the batch as one walk, `walks_whole_batch`), so an
image of a batch differs from the same seed sampled alone, as in A1111. Everything runs in float32, as k-diffusion's.
"""

from __future__ import annotations

import math
from typing import Callable, Iterator

import torch

from pipelines.samplers.dpm_fast import a1111_dpm_sigma_range
from pipelines.samplers.planned_walk import PlannedWalkScheduler
from pipelines.samplers.sigma_schedules import timestep_at
from pipelines.samplers.sigma_steps import ancestral_split, predicted_original

# k-diffusion's `sample_dpm_adaptive` defaults, which A1111 never overrides.
ORDER = 3
RTOL, ATOL = 0.05, 0.0078
H_INIT = 0.05
PCOEFF, ICOEFF, DCOEFF = 0.0, 1.0, 0.0
ACCEPT_SAFETY = 0.81
END_TOLERANCE = 1e-5  # the walk stops once t is this close to t(sigma_min)


class StepSizeController:
    """A PID controller of the step size h from the scaled error of each attempt (Söderlind 2003), as k-diffusion's
    `PIDStepSizeController`: the factor is the error history raised to the gains, softened by 1 + atan(f - 1)."""

    def __init__(self, h: float, order: float, pcoeff: float = PCOEFF, icoeff: float = ICOEFF,
                 dcoeff: float = DCOEFF, accept_safety: float = ACCEPT_SAFETY, eps: float = 1e-8) -> None:
        self.h = h
        self.gains = ((pcoeff + icoeff + dcoeff) / order, -(pcoeff + 2 * dcoeff) / order, dcoeff / order)
        self.accept_safety = accept_safety
        self.eps = eps
        self.inverse_errors: list[float] = []  # the latest attempt's, then the last two accepted ones'

    def propose(self, error) -> bool:
        """Scale h by the controller's factor; whether the attempt whose `error` this is is accepted."""
        inverse = 1 / (float(error) + self.eps)
        if not self.inverse_errors:
            self.inverse_errors = [inverse] * 3
        self.inverse_errors[0] = inverse
        factor = 1.0
        for value, gain in zip(self.inverse_errors, self.gains):
            factor *= value**gain
        factor = 1 + math.atan(factor - 1)
        accept = factor >= self.accept_safety
        if accept:
            self.inverse_errors[1:] = self.inverse_errors[:2]
        self.h *= factor
        return accept


def _sigma(t: torch.Tensor) -> torch.Tensor:
    return t.neg().exp()


def dpm_solver_23(x, eps: list, t, t_next):
    """(second-order, third-order) DPM-Solver results at t_next from the noise estimates at t, t + h/3, t + 2h/3."""
    h = t_next - t
    sigma_next = _sigma(t_next)
    first_order = x - sigma_next * h.expm1() * eps[0]
    low = first_order - sigma_next / (2 / 3) * h.expm1() * (eps[1] - eps[0])  # r1 = 1/3
    high = first_order - sigma_next / (2 / 3) * (h.expm1() / h - 1) * (eps[2] - eps[0])  # r2 = 2/3
    return low, high


def dpm_solver_12(x, eps: list, t, t_next):
    """(first-order, second-order) DPM-Solver results at t_next from the noise estimates at t and t + h/2."""
    h = t_next - t
    sigma_next = _sigma(t_next)
    low = x - sigma_next * h.expm1() * eps[0]
    return low, low - sigma_next / (2 * 0.5) * h.expm1() * (eps[1] - eps[0])


def _stage_input(x, eps: list, t, h, order: int):
    """Where an attempt's next model call is made after noise estimates `eps`: (input, its t)."""
    r1 = 1 / 3 if order == 3 else 1 / 2
    s1 = t + r1 * h
    u1 = x - _sigma(s1) * (r1 * h).expm1() * eps[0]
    if len(eps) == 1:
        return u1, s1
    r2 = 2 / 3
    s2 = t + r2 * h
    u2 = (x - _sigma(s2) * (r2 * h).expm1() * eps[0]
          - _sigma(s2) * (r2 / r1) * ((r2 * h).expm1() / (r2 * h) - 1) * (eps[1] - eps[0]))
    return u2, s2


class DPMAdaptiveWalk:
    """k-diffusion's `dpm_solver_adaptive` from sigma_max down to sigma_min, one model call at a time.

    `call` is where the model is to be called next, (input, sigma), or None once the walk has ended; `take` hands it
    the denoised estimate there. `x` is the latest accepted sample, `t` its -log sigma. `noise(sigma, sigma_next)`
    draws an accepted ancestral step's N(0, I) noise (k-diffusion's `noise_sampler`, called on every accepted step).
    """

    def __init__(self, x: torch.Tensor, sigma_min: float, sigma_max: float, noise: Callable, *, eta: float = 0.0,
                 s_noise: float = 1.0, order: int = ORDER, rtol: float = RTOL, atol: float = ATOL,
                 h_init: float = H_INIT, pcoeff: float = PCOEFF, icoeff: float = ICOEFF, dcoeff: float = DCOEFF,
                 accept_safety: float = ACCEPT_SAFETY) -> None:
        if sigma_min <= 0 or sigma_max <= 0:
            raise ValueError(f"DPM adaptive needs sigma_min and sigma_max > 0, got {sigma_min} and {sigma_max}")
        if order not in (2, 3):
            raise ValueError(f"DPM adaptive's order must be 2 or 3, got {order}")
        self.x = x
        self.t = -torch.tensor(sigma_max).log()
        self.t_start, self.t_end = self.t, -torch.tensor(sigma_min).log()
        self.order, self.eta, self.s_noise, self.noise = order, eta, s_noise, noise
        self.atol, self.rtol = torch.tensor(atol), torch.tensor(rtol)
        self.controller = StepSizeController(abs(h_init), 1.5 if eta else order, pcoeff, icoeff, dcoeff,
                                             accept_safety)
        self.accepted = self.rejected = self.calls = 0
        self._x_prev = x
        self._steps = self._attempts()
        self.call = next(self._steps)

    @property
    def finished(self) -> bool:
        return self.call is None

    @property
    def progress(self) -> float:
        """How much of the log-sigma range the accepted steps have covered, 0 to 1."""
        return min(1.0, float((self.t - self.t_start) / (self.t_end - self.t_start)))

    def take(self, denoised: torch.Tensor) -> None:
        """The denoised estimate at `call`; moves `call` on (None when the walk has ended)."""
        self.calls += 1
        self.call = self._steps.send(denoised)

    def _attempts(self) -> Iterator:
        while self.t < self.t_end - END_TOLERANCE:
            s, x = self.t, self.x
            t = torch.minimum(self.t_end, s + self.controller.h)
            aim, sigma_up = t, 0.0
            if self.eta:
                sigma_down, _ = ancestral_split(_sigma(s), _sigma(t), self.eta)
                aim = torch.minimum(self.t_end, -sigma_down.log())
                sigma_up = (_sigma(t) ** 2 - _sigma(aim) ** 2) ** 0.5
            eps = []
            point, at = x, s
            for _ in range(self.order):
                denoised = yield point, _sigma(at)
                eps.append((point - denoised) / _sigma(at))
                if len(eps) < self.order:
                    point, at = _stage_input(x, eps, s, aim - s, self.order)
            solve = dpm_solver_23 if self.order == 3 else dpm_solver_12
            low, high = solve(x, eps, s, aim)
            delta = torch.maximum(self.atol, self.rtol * torch.maximum(low.abs(), self._x_prev.abs()))
            error = torch.linalg.norm((low - high) / delta) / x.numel() ** 0.5
            if self.controller.propose(error):
                self._x_prev = low
                self.x = high
                if self.eta:  # k-diffusion draws it at sigma_up 0 too, where it changes nothing
                    self.x = high + sigma_up * self.s_noise * self.noise(_sigma(s), _sigma(t))
                self.t = t
                self.accepted += 1
            else:
                self.rejected += 1
        yield None


def sample_dpm_adaptive(model, x, sigma_min: float, sigma_max: float, noise: Callable, **options) -> torch.Tensor:
    """k-diffusion's `sample_dpm_adaptive(model, x, sigma_min, sigma_max, ...)`: `model(x, sigma)` is the denoiser."""
    walk = DPMAdaptiveWalk(x, sigma_min, sigma_max, noise, **options)
    while not walk.finished:
        point, sigma = walk.call
        walk.take(model(point, sigma * point.new_ones(point.shape[0])))
    return walk.x


class DPMAdaptiveScheduler(PlannedWalkScheduler):
    """DPM adaptive as a diffusers scheduler: `timesteps` holds the first call, `model_calls()` yields the rest.

    A1111's sigma range (dpm_fast.py); the walk starts at the first `step`, from the sample it is handed. One instance
    walks the whole batch it steps (its error is the batch's, as in k-diffusion and A1111).
    """

    eta = 1.0  # A1111's "Eta" (eta_ancestral)
    s_noise = 1.0  # A1111's "Sigma noise"
    walks_whole_batch = True  # mixkit's loop steps the batch's rows as one walk (the batch's error), A1111's way

    def plan(self, sigmas: torch.Tensor, img2img: bool) -> torch.Tensor:
        self.sigma_min, self.sigma_max, _ = a1111_dpm_sigma_range(self, sigmas, img2img)
        self.walk = None
        # img2img below one step (strength < 1 / steps: A1111's t_enc 0) hands it sigma_min == sigma_max: k-diffusion
        # then calls the model not once and returns the noised input, so no call is made here either
        self.walks = float(torch.tensor(self.sigma_max / self.sigma_min).log()) > END_TOLERANCE
        # the first call, at sigma(t(sigma_max)) as k-diffusion computes it; the rest depend on the sample
        self._first_sigma = _sigma(-torch.tensor(self.sigma_max).log())
        return self._first_sigma.reshape(1)

    def model_calls(self) -> Iterator[torch.Tensor]:
        """The model timestep of each call, decided after the previous call's `step` (none when it has no range)."""
        if not self.walks:
            return
        yield self.timesteps[0]
        device = self.timesteps.device
        while self.walk is not None and not self.walk.finished:
            yield torch.tensor(self._timestep(self.walk.call[1]), dtype=torch.float32, device=device)

    def _timestep(self, sigma) -> float:
        alphas = self.alphas_cumprod.double()
        return timestep_at(float(sigma), ((1.0 - alphas) / alphas).sqrt().cpu().numpy())

    @property
    def call_sigma(self) -> torch.Tensor:
        """The sigma of the model call being made."""
        return self.walk.call[1] if self.walk is not None else self._first_sigma

    def scale_model_input(self, sample, timestep=None):
        return sample / (self.call_sigma**2 + 1) ** 0.5

    @property
    def progress(self) -> float:
        return 0.0 if self.walk is None else (1.0 if self.walk.finished else self.walk.progress)

    def step(self, model_output, timestep, sample, generator=None, return_dict: bool = True, **_):
        from diffusers.schedulers.scheduling_euler_discrete import EulerDiscreteSchedulerOutput
        from pipelines.samplers.noise import sampler_noise

        sample = sample.to(torch.float32)
        if self.walk is None:
            def noise(sigma, sigma_next):  # k-diffusion's `randn_like`, per image from its generator (A1111's RNG)
                return sampler_noise(sample.shape, generator=generator, device=sample.device, dtype=torch.float32)

            self.walk = DPMAdaptiveWalk(sample, self.sigma_min, self.sigma_max, noise, eta=self.eta,
                                        s_noise=self.s_noise)
        denoised = predicted_original(model_output.to(torch.float32), sample, self.call_sigma,
                                      self.config.prediction_type)
        self.walk.take(denoised)
        prev_sample = self.walk.x if self.walk.finished else self.walk.call[0]
        prev_sample, denoised = prev_sample.to(model_output.dtype), denoised.to(model_output.dtype)
        if not return_dict:
            return prev_sample, denoised
        return EulerDiscreteSchedulerOutput(prev_sample=prev_sample, pred_original_sample=denoised)


def calls_depend_on_the_sample(scheduler) -> bool:
    """Whether the scheduler decides its model calls as it walks (DPM adaptive): no call can be planned by its
    index, so rules that count calls (the refiner's switch, the loop's timesteps) ask the walk instead."""
    return hasattr(scheduler, "model_calls")


def model_call_timesteps(scheduler, timesteps=None):
    """The timesteps a loop calls the model at: `timesteps` (default: the scheduler's), or, for a sampler whose
    calls depend on the sample (DPM adaptive), each one as the previous `step` decides it."""
    if calls_depend_on_the_sample(scheduler):
        return scheduler.model_calls()
    return scheduler.timesteps if timesteps is None else timesteps
