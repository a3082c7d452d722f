"""Reference noise schedules and a toy model, written from the k-diffusion / A1111 formulas.

These are the oracle for the sampler tests: k-diffusion's `DiscreteSchedule` sigmas (log-linear
interpolation between training timesteps), A1111's `sgm_uniform`, and Karras et al. 2022 eq. 5.
`k-diffusion` itself is not installed because it drags in torchvision/CLIP; the formulas are short.
"""

from __future__ import annotations

import math

import torch

SD15_SCHEDULER_CONFIG = {
    "_class_name": "PNDMScheduler",
    "_diffusers_version": "0.6.0",
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "beta_start": 0.00085,
    "num_train_timesteps": 1000,
    "set_alpha_to_one": False,
    "skip_prk_steps": True,
    "steps_offset": 1,
    "trained_betas": None,
    "clip_sample": False,
}

SD2_V_SCHEDULER_CONFIG = {
    "_class_name": "DDIMScheduler",
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "beta_start": 0.00085,
    "clip_sample": False,
    "num_train_timesteps": 1000,
    "prediction_type": "v_prediction",
    "set_alpha_to_one": False,
    "steps_offset": 1,
    "trained_betas": None,
}


def alphas_cumprod(config: dict) -> torch.Tensor:
    """SD's "scaled_linear" betas: linear in sqrt(beta)."""
    assert config["beta_schedule"] == "scaled_linear"
    n = config["num_train_timesteps"]
    betas = torch.linspace(config["beta_start"] ** 0.5, config["beta_end"] ** 0.5, n, dtype=torch.float64) ** 2
    return torch.cumprod(1.0 - betas, dim=0)


def training_sigmas(config: dict) -> torch.Tensor:
    ac = alphas_cumprod(config)
    return ((1 - ac) / ac).sqrt()


def t_to_sigma(config: dict, t: torch.Tensor) -> torch.Tensor:
    log_sigmas = training_sigmas(config).log()
    low = t.floor().long().clamp(0, len(log_sigmas) - 2)
    w = t - low
    return ((1 - w) * log_sigmas[low] + w * log_sigmas[low + 1]).exp()


def _append_zero(sigmas: torch.Tensor) -> torch.Tensor:
    return torch.cat([sigmas, sigmas.new_zeros(1)])


def uniform_sigmas(config: dict, n: int) -> torch.Tensor:
    t_max = config["num_train_timesteps"] - 1
    return _append_zero(t_to_sigma(config, torch.linspace(t_max, 0, n, dtype=torch.float64)))


def sgm_uniform_sigmas(config: dict, n: int) -> torch.Tensor:
    t_max = config["num_train_timesteps"] - 1
    return _append_zero(t_to_sigma(config, torch.linspace(t_max, 0, n + 1, dtype=torch.float64)[:-1]))


def karras_sigmas(config: dict, n: int, rho: float = 7.0) -> torch.Tensor:
    sigmas = training_sigmas(config)
    lo, hi = sigmas[0].item() ** (1 / rho), sigmas[-1].item() ** (1 / rho)
    ramp = torch.linspace(0, 1, n, dtype=torch.float64)
    return _append_zero((hi + ramp * (lo - hi)) ** rho)


def exponential_sigmas(config: dict, n: int) -> torch.Tensor:
    sigmas = training_sigmas(config)
    return _append_zero(torch.linspace(math.log(sigmas[-1].item()), math.log(sigmas[0].item()), n, dtype=torch.float64).exp())


def kl_optimal_sigmas(config: dict, n: int) -> torch.Tensor:
    """A1111's `kl_optimal`: n + 1 sigmas uniform in arctan(sigma), ending *at* sigma_min (no zero)."""
    sigmas = training_sigmas(config)
    angles = torch.linspace(math.atan(sigmas[-1].item()), math.atan(sigmas[0].item()), n + 1, dtype=torch.float64)
    return angles.tan()


AYS_SD15 = [14.615, 6.475, 3.861, 2.697, 1.886, 1.396, 0.963, 0.652, 0.399, 0.152, 0.029]
AYS_SDXL = [14.615, 6.315, 3.771, 2.181, 1.342, 0.862, 0.555, 0.380, 0.234, 0.113, 0.029]


def align_your_steps_sigmas(config: dict, n: int, sdxl: bool = False) -> torch.Tensor:
    """NVIDIA's AYS list; other step counts: piecewise-linear log sigma at n evenly spaced points."""
    published = torch.tensor(AYS_SDXL if sdxl else AYS_SD15, dtype=torch.float64)
    if n == len(published):
        return _append_zero(published)
    logs = published.log()
    positions = torch.linspace(0, len(published) - 1, n, dtype=torch.float64)
    low = positions.floor().long().clamp(max=len(published) - 2)
    w = positions - low
    return _append_zero(((1 - w) * logs[low] + w * logs[low + 1]).exp())


def simple_sigmas(config: dict, n: int) -> torch.Tensor:
    """A1111's `simple_scheduler`: the training sigma at index 999 - int(k * 1000 / n), k = 0..n-1."""
    sigmas = training_sigmas(config)
    count = len(sigmas)
    return _append_zero(torch.stack([sigmas[count - 1 - int(k * count / n)] for k in range(n)]))


def ddim_uniform_sigmas(config: dict, n: int) -> torch.Tensor:
    """A1111's `ddim_scheduler`: training sigmas at t = 1, 1 + k, ... < 1000 (k = 1000 // n), top first."""
    sigmas = training_sigmas(config)
    stride = max(len(sigmas) // n, 1)
    return _append_zero(sigmas[torch.arange(1, len(sigmas), stride)].flip(0))


def beta_schedule_sigmas(config: dict, n: int, alpha: float = 0.6, beta: float = 0.6) -> torch.Tensor:
    """A1111's `beta_scheduler`: sigma_min + ppf(1 - k / (n - 1)) * (sigma_max - sigma_min)."""
    from scipy.special import betaincinv

    sigmas = training_sigmas(config)
    low, high = sigmas[0].item(), sigmas[-1].item()
    quantiles = [1.0 - k / (n - 1) if n > 1 else 1.0 for k in range(n)]
    return _append_zero(torch.tensor([low + betaincinv(alpha, beta, q) * (high - low) for q in quantiles], dtype=torch.float64))


REFERENCE_SCHEDULES = {
    "Uniform": uniform_sigmas,
    "Karras": karras_sigmas,
    "Exponential": exponential_sigmas,
    "Polyexponential": exponential_sigmas,  # A1111's default rho = 1
    "SGM Uniform": sgm_uniform_sigmas,
    "KL Optimal": kl_optimal_sigmas,
    "Align Your Steps": align_your_steps_sigmas,
    "Simple": simple_sigmas,
    "Normal": uniform_sigmas,  # linspace(t(sigma_max), t(sigma_min), n) is linspace(999, 0, n)
    "DDIM": ddim_uniform_sigmas,
    "Beta": beta_schedule_sigmas,
}


class GaussianDataModel:
    """The exact denoiser for data ~ N(mean, std^2), in the model's own parameterisation.

    Called like a UNet on the *scaled* model input x_t = sqrt(a) x0 + sqrt(1 - a) eps at a
    (possibly fractional) timestep t; returns epsilon or v as the config's prediction_type says.
    A correct sampler must then turn N(0, I) latents into samples with this mean and std.
    """

    def __init__(self, config: dict, mean: float = 0.5, std: float = 0.5) -> None:
        self.ac = alphas_cumprod(config).float()
        self.prediction_type = config.get("prediction_type", "epsilon")
        self.mean, self.std = mean, std

    def alpha_bar(self, t) -> torch.Tensor:
        t = torch.as_tensor(t, dtype=torch.float64).clamp(0, len(self.ac) - 1)
        low = t.floor().long().clamp(max=len(self.ac) - 2)
        w = (t - low).float()
        return (1 - w) * self.ac[low] + w * self.ac[low + 1]

    def __call__(self, x_t: torch.Tensor, t) -> torch.Tensor:
        a = self.alpha_bar(t)
        sa, sb = a.sqrt(), (1 - a).sqrt()
        var = a * self.std**2 + (1 - a)
        eps = sb * (x_t - sa * self.mean) / var
        if self.prediction_type == "epsilon":
            return eps
        x0 = self.mean + sa * self.std**2 * (x_t - sa * self.mean) / var
        assert self.prediction_type == "v_prediction"
        return sa * eps - sb * x0


def gaussian_denoiser(x: torch.Tensor, sigma: float, mean: float = 0.5, std: float = 0.5) -> torch.Tensor:
    """k-diffusion's D(x, sigma) for data ~ N(mean, std^2) with x = x0 + sigma * noise."""
    return mean + std**2 * (x - mean) / (std**2 + sigma**2)


def sample_euler(x: torch.Tensor, sigmas: torch.Tensor) -> torch.Tensor:
    """k-diffusion `sample_euler` (no churn), written from Karras et al. 2022 alg. 1."""
    for i in range(len(sigmas) - 1):
        s, s_next = sigmas[i].item(), sigmas[i + 1].item()
        x = x + (x - gaussian_denoiser(x, s)) / s * (s_next - s)
    return x


def sample_dpmpp_2m(x: torch.Tensor, sigmas: torch.Tensor) -> torch.Tensor:
    """k-diffusion `sample_dpmpp_2m`: DPM-Solver++(2M), first order on the first and last steps."""
    old, h_last = None, None
    for i in range(len(sigmas) - 1):
        s, s_next = sigmas[i].item(), sigmas[i + 1].item()
        denoised = gaussian_denoiser(x, s)
        if s_next == 0:
            x = denoised
            break
        h = math.log(s / s_next)
        if old is None:
            d = denoised
        else:
            r = h_last / h
            d = (1 + 1 / (2 * r)) * denoised - (1 / (2 * r)) * old
        x = (s_next / s) * x - math.expm1(-h) * d
        old, h_last = denoised, h
    return x


def sample_euler_ancestral(x: torch.Tensor, sigmas: torch.Tensor, generator: torch.Generator, eta: float = 1.0) -> torch.Tensor:
    """k-diffusion `sample_euler_ancestral`; noise drawn in float32 from `generator` (at every eta)."""
    for i in range(len(sigmas) - 1):
        s, s_next = sigmas[i].item(), sigmas[i + 1].item()
        s_up = min(s_next, eta * (s_next**2 * (s**2 - s_next**2) / s**2) ** 0.5)
        s_down = (s_next**2 - s_up**2) ** 0.5
        x = x + (x - gaussian_denoiser(x, s)) / s * (s_down - s)
        noise = torch.randn(x.shape, generator=generator, dtype=torch.float32).double()
        if s_next > 0:
            x = x + noise * s_up
    return x


def sample_lms(x: torch.Tensor, sigmas: torch.Tensor, order: int = 4) -> torch.Tensor:
    """k-diffusion `sample_lms`: Adams-Bashforth in sigma, order min(steps so far + 1, 4).

    Coefficients integrate each Lagrange basis polynomial of the held derivatives exactly (numpy
    polynomials, where k-diffusion uses numerical quadrature).
    """
    import numpy as np

    s = sigmas.double().numpy()
    derivatives = []
    for i in range(len(s) - 1):
        derivatives.append((x - gaussian_denoiser(x, s[i])) / s[i])
        derivatives = derivatives[-order:]
        held = len(derivatives)
        update = torch.zeros_like(x)
        for j in range(held):  # derivative j steps back
            basis = np.polynomial.Polynomial([1.0])
            for k in range(held):
                if k != j:
                    basis = basis * np.polynomial.Polynomial([-s[i - k], 1.0]) / (s[i - j] - s[i - k])
            integral = basis.integ()
            update = update + (integral(s[i + 1]) - integral(s[i])) * derivatives[-1 - j]
        x = x + update
    return x


def sample_dpmpp_2m_sde(x: torch.Tensor, sigmas: torch.Tensor, generator: torch.Generator | None = None,
                        heun: bool = False, noise_sampler=None, eta: float = 1.0) -> torch.Tensor:
    """k-diffusion `sample_dpmpp_2m_sde`: noise from `noise_sampler(sigma, sigma_next)` (its Brownian tree, as
    A1111 passes it) or, without one, Gaussian noise per step from `generator`; none at eta 0."""
    old, h_last = None, None
    for i in range(len(sigmas) - 1):
        s, s_next = sigmas[i].item(), sigmas[i + 1].item()
        denoised = gaussian_denoiser(x, s)
        if s_next == 0:
            x = denoised
        else:
            h = math.log(s / s_next)
            eta_h = eta * h
            data_weight = -math.expm1(-h - eta_h)  # 1 - exp(-h - eta h)
            x = (s_next / s) * math.exp(-eta_h) * x + data_weight * denoised
            if old is not None:
                weight = data_weight / (-h - eta_h) + 1 if heun else 0.5 * data_weight
                x = x + weight * (h / h_last) * (denoised - old)
            if eta:
                if noise_sampler is not None:
                    noise = noise_sampler(sigmas[i].float(), sigmas[i + 1].float()).double()
                else:
                    noise = torch.randn(x.shape, generator=generator, dtype=torch.float64)
                x = x + noise * s_next * (-math.expm1(-2 * eta_h)) ** 0.5
            h_last = h
        old = denoised
    return x


def _ancestral_step(x, denoised, s: float, target: float, eta: float, noise) -> torch.Tensor:
    """k-diffusion's DPM-Solver++ first-order step from `s` to `target`'s sigma_down, plus sigma_up of noise."""
    s_up = min(target, eta * (target**2 * (s**2 - target**2) / s**2) ** 0.5)
    s_down = (target**2 - s_up**2) ** 0.5
    return (s_down / s) * x - (s_down / s - 1) * denoised + noise.double() * s_up


def sample_dpmpp_sde(x: torch.Tensor, sigmas: torch.Tensor, noise_sampler, eta: float = 1.0) -> torch.Tensor:
    """k-diffusion `sample_dpmpp_sde` with r = 1/2 (its default): a step to the log-sigma midpoint, then one from
    the start to sigma_next with the midpoint's estimate, each split at `eta`; Euler on the last step."""
    for i in range(len(sigmas) - 1):
        s, s_next = sigmas[i].item(), sigmas[i + 1].item()
        denoised = gaussian_denoiser(x, s)
        if s_next == 0:
            x = x + (x - denoised) / s * (s_next - s)
            continue
        midpoint = (s * s_next) ** 0.5

        def tree(target):
            return noise_sampler(torch.tensor(s, dtype=torch.float32), torch.tensor(target, dtype=torch.float32))

        x_mid = _ancestral_step(x, denoised, s, midpoint, eta, tree(midpoint))
        x = _ancestral_step(x, gaussian_denoiser(x_mid, midpoint), s, s_next, eta, tree(s_next))
    return x


def sample_dpm_2_ancestral(x: torch.Tensor, sigmas: torch.Tensor, generator: torch.Generator, eta: float = 1.0):
    """k-diffusion `sample_dpm_2_ancestral`: DPM-Solver-2 to sigma_down through the log-sigma midpoint, then noise."""
    for i in range(len(sigmas) - 1):
        s, s_next = sigmas[i].item(), sigmas[i + 1].item()
        s_up = min(s_next, eta * (s_next**2 * (s**2 - s_next**2) / s**2) ** 0.5)
        s_down = (s_next**2 - s_up**2) ** 0.5
        d = (x - gaussian_denoiser(x, s)) / s
        if s_down == 0:
            x = x + d * (s_down - s)
        else:
            s_mid = math.exp((math.log(s) + math.log(s_down)) / 2)
            x_mid = x + d * (s_mid - s)
            x = x + (x_mid - gaussian_denoiser(x_mid, s_mid)) / s_mid * (s_down - s)
        noise = torch.randn(x.shape, generator=generator, dtype=torch.float32).double()
        x = x + noise * s_up
    return x


def sample_dpmpp_2s_ancestral(x: torch.Tensor, sigmas: torch.Tensor, generator: torch.Generator,
                              eta: float = 1.0) -> torch.Tensor:
    """k-diffusion `sample_dpmpp_2s_ancestral`; noise drawn in float32 from `generator`."""
    for i in range(len(sigmas) - 1):
        s, s_next = sigmas[i].item(), sigmas[i + 1].item()
        denoised = gaussian_denoiser(x, s)
        s_up = min(s_next, eta * (s_next**2 * (s**2 - s_next**2) / s**2) ** 0.5)
        s_down = (s_next**2 - s_up**2) ** 0.5
        if s_down == 0:
            x = denoised
        else:
            h, s_mid = math.log(s / s_down), (s * s_down) ** 0.5
            x_mid = (s_mid / s) * x - math.expm1(-h / 2) * denoised
            x = (s_down / s) * x - math.expm1(-h) * gaussian_denoiser(x_mid, s_mid)
        if s_next > 0:
            x = x + torch.randn(x.shape, generator=generator, dtype=torch.float32).double() * s_up
    return x


def sigma_to_t(config: dict, sigma: float) -> float:
    """k-diffusion `DiscreteSchedule.sigma_to_t` (unquantized): the index, linear in log sigma, clamped to [0, 999]."""
    log_sigmas = training_sigmas(config).log()
    log_sigma = math.log(sigma)
    dists = log_sigma - log_sigmas
    low = int(dists.ge(0).cumsum(dim=0).argmax().clamp(max=len(log_sigmas) - 2))
    w = ((log_sigmas[low] - log_sigma) / (log_sigmas[low] - log_sigmas[low + 1])).clamp(0, 1).item()
    return (1 - w) * low + w * (low + 1)


def ranged_schedule(name: str, config: dict, n: int, sigma_min: float, sigma_max: float, rho: float | None = None):
    """A1111 1.10's schedule functions (`sd_schedulers.py`, k-diffusion's get_sigmas_*) at a given sigma range."""
    if name == "Karras":
        rho = 7.0 if rho is None else rho
        ramp = torch.linspace(0, 1, n, dtype=torch.float64)
        low, high = sigma_min ** (1 / rho), sigma_max ** (1 / rho)
        return _append_zero((high + ramp * (low - high)) ** rho)
    if name == "Exponential":
        return _append_zero(torch.linspace(math.log(sigma_max), math.log(sigma_min), n, dtype=torch.float64).exp())
    if name == "Polyexponential":
        ramp = torch.linspace(1, 0, n, dtype=torch.float64) ** (1.0 if rho is None else rho)
        return _append_zero((ramp * (math.log(sigma_max) - math.log(sigma_min)) + math.log(sigma_min)).exp())
    if name in ("SGM Uniform", "Normal"):
        start, end = sigma_to_t(config, sigma_max), sigma_to_t(config, sigma_min)
        if name == "SGM Uniform":
            timesteps = torch.linspace(start, end, n + 1, dtype=torch.float64)[:-1]
        else:
            timesteps = torch.linspace(start, end, n, dtype=torch.float64)
        return _append_zero(t_to_sigma(config, timesteps))
    if name == "KL Optimal":
        steps = torch.arange(n + 1, dtype=torch.float64) / n
        return torch.tan(steps * math.atan(sigma_min) + (1.0 - steps) * math.atan(sigma_max))
    if name == "Beta":
        from scipy import stats

        quantiles = [stats.beta.ppf(1 - x, 0.6, 0.6) for x in torch.linspace(0, 1, n, dtype=torch.float64).tolist()]
        return _append_zero(torch.tensor([sigma_min + q * (sigma_max - sigma_min) for q in quantiles], dtype=torch.float64))
    raise KeyError(name)
