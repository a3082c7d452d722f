"""A1111's sampler settings that change how a sampler walks, as one typed value.

Schedule bounds and rho (A1111's `KDiffusionSampler.get_sigmas`), Euler/Heun/DPM2 churn (k-diffusion's
`sample_euler`'s s_churn, s_tmin, s_tmax, s_noise), the forced discard of the penultimate sigma, the Beta
schedule's alpha/beta (`sd_schedulers.beta_scheduler`), UniPC's variant, skip type, order and lower-order final
(`sd_samplers_timesteps_impl.unipc`), the noise schedule (Zero Terminal SNR) and the fp16 downcast of
alphas_cumprod (`sd_models.apply_alpha_schedule_override`, `pipelines.samplers.alphas_cumprod`), and the padding of
prompt and negative prompt to one length (`sd_samplers_cfg_denoiser`, `mixkit.prompts.cond_padding`). Every
default is "run the sampler as it is", and a default value changes nothing, bit for bit. The infotext keys are
A1111's (`shared_options.py` `infotext=`), written only where the value is not the default *and* changes the
image, as A1111 writes them; `from_infotext` reads them back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from mixkit.finite_numbers import is_finite_number
from pipelines.infotext_values import as_integer

# A1111 1.10's `sampler_extra_params`: the samplers whose k-diffusion function takes churn, by mixkit/A1111 name.
CHURN_SAMPLERS = ("Euler", "Heun", "DPM2")
# ... and those whose function takes s_noise only, which scales their fresh noise (Euler a takes none in A1111 1.10).
S_NOISE_SAMPLERS = ("DPM2 a", "DPM++ 2S a", "DPM++ SDE", "DPM++ 2M SDE", "DPM++ 2M SDE Heun", "DPM++ 3M SDE",
                    "DPM fast")

# option name -> infotext key (A1111's `shared_options.py`); `always_discard...` is written as "True".
INFOTEXT_KEYS = {
    "sigma_min": "Schedule min sigma",
    "sigma_max": "Schedule max sigma",
    "rho": "Schedule rho",
    "s_churn": "Sigma churn",
    "s_tmin": "Sigma tmin",
    "s_tmax": "Sigma tmax",
    "s_noise": "Sigma noise",
    "always_discard_next_to_last_sigma": "Discard penultimate sigma",
    "sgm_noise_multiplier": "SGM noise multiplier",
    "beta_dist_alpha": "Beta schedule alpha",
    "beta_dist_beta": "Beta schedule beta",
    "uni_pc_variant": "UniPC variant",
    "uni_pc_skip_type": "UniPC skip type",
    "uni_pc_order": "UniPC order",
    "uni_pc_lower_order_final": "UniPC lower order final",
    "sd_noise_schedule": "Noise Schedule",
    "pad_cond_uncond": "Pad conds",
    "pad_cond_uncond_v0": "Pad conds v0",
    "use_downcasted_alpha_bar": "Downcast alphas_cumprod",
}
# A1111 1.6 wrote "SGM noise multplier" (sic); later versions spell it right, and both circulate. A1111 1.10 writes
# "Beta schedule alpha" but its option's own infotext name (what its paste reads) is "Beta scheduler alpha".
INFOTEXT_ALIASES = {"SGM noise multplier": "sgm_noise_multiplier", "Beta scheduler alpha": "beta_dist_alpha",
                    "Beta scheduler beta": "beta_dist_beta"}
FLAGS = ("always_discard_next_to_last_sigma", "sgm_noise_multiplier", "uni_pc_lower_order_final", "pad_cond_uncond",
         "pad_cond_uncond_v0", "use_downcasted_alpha_bar")
# A1111's radio settings and their choices (`shared_options.py`)
CHOICES = {
    "uni_pc_variant": ("bh1", "bh2", "vary_coeff"),
    "uni_pc_skip_type": ("time_uniform", "time_quadratic", "logSNR"),
    "sd_noise_schedule": ("Default", "Zero Terminal SNR"),
}
INTEGERS = ("uni_pc_order",)
BETA_PARAMETERS = ("beta_dist_alpha", "beta_dist_beta")
UNIPC_OPTIONS = ("uni_pc_variant", "uni_pc_skip_type", "uni_pc_order", "uni_pc_lower_order_final")
ZERO_TERMINAL_SNR = "Zero Terminal SNR"


@dataclass(frozen=True)
class SamplerParameters:
    """A1111's sampler settings, by its option names; each default runs the sampler unchanged."""

    sigma_min: float = 0.0  # lowest sigma of the schedule; 0: the model's (A1111's "0 = default")
    sigma_max: float = 0.0  # highest sigma of the schedule; 0: the model's
    rho: float = 0.0  # Karras / Polyexponential exponent; 0: the schedule's own (7 / 1)
    s_churn: float = 0.0  # Euler, Heun, DPM2: noise added back per step (Karras et al. 2022, Algorithm 2)
    s_tmin: float = 0.0  # churn only at sigmas >= s_tmin
    s_tmax: float = 0.0  # churn only at sigmas <= s_tmax; 0 means infinity, as in A1111
    s_noise: float = 1.0  # scale of the churn noise
    always_discard_next_to_last_sigma: bool = False  # A1111's "Discard penultimate sigma" for every k-sampler
    # txt2img's initial noise at sqrt(1 + sigma_max^2) instead of sigma_max (Stability's SGM code), k-samplers only
    sgm_noise_multiplier: bool = False
    # the Beta schedule's Beta(alpha, beta) distribution (A1111's defaults, from Lee et al. 2024)
    beta_dist_alpha: float = 0.6
    beta_dist_beta: float = 0.6
    uni_pc_variant: str = "bh1"  # UniPC's update: bh1, bh2 (its B(h)) or vary_coeff
    uni_pc_skip_type: str = "time_uniform"  # UniPC's time grid: time_uniform, time_quadratic or logSNR
    uni_pc_order: int = 3  # UniPC's order; a walk of fewer steps lowers it (A1111 refuses such a walk)
    uni_pc_lower_order_final: bool = True  # UniPC lowers its order over the last steps
    # "Zero Terminal SNR": the model's alphas_cumprod rescaled so that the last step is (nearly) pure noise
    sd_noise_schedule: str = "Default"
    pad_cond_uncond: bool = False  # prompt / negative prompt of different lengths padded with the empty prompt
    pad_cond_uncond_v0: bool = False  # A1111's older padding: the negative prompt's last vector repeated, or cut
    use_downcasted_alpha_bar: bool = False  # alphas_cumprod rounded to fp16 first, as A1111 before 1.8

    @property
    def tmax(self) -> float:
        """s_tmax with A1111's reading of 0 as infinity."""
        return self.s_tmax or math.inf

    @property
    def churns(self) -> bool:
        """Whether churn adds noise on some step (it does only with s_churn > 0)."""
        return self.s_churn > 0

    def schedule_kwargs(self, schedule) -> dict[str, float]:
        """The bounds / rho / Beta shape the `ScheduleType` `schedule` takes from these settings (A1111's `get_sigmas`).

        A1111 passes sigma_min / sigma_max when not 0 to every schedule function, which only some use; rho only
        to schedules with a rho, and only when it is not 0 and not the schedule's own; Beta reads its alpha / beta."""
        kwargs: dict[str, float] = {}
        if schedule.takes_sigma_range:
            if self.sigma_min:
                kwargs["sigma_min"] = float(self.sigma_min)
            if self.sigma_max:
                kwargs["sigma_max"] = float(self.sigma_max)
        if schedule.default_rho > 0 and self.rho and self.rho != schedule.default_rho:
            kwargs["rho"] = float(self.rho)
        if schedule.name == "Beta":  # only when changed: the default runs the very class that ran before
            for name, keyword in zip(BETA_PARAMETERS, ("alpha", "beta")):
                if getattr(self, name) != _DEFAULTS[name]:
                    kwargs[keyword] = float(getattr(self, name))
        return kwargs

    def discards_penultimate(self, spec) -> bool:
        """Whether the sampler `spec` drops its schedule's penultimate sigma (its own rule, or this setting)."""
        return spec.discard_penultimate_sigma or self.always_discard_next_to_last_sigma

    def infotext_values(self, spec, schedule) -> dict[str, Any]:
        """A1111's keys for the settings that change this image with sampler `spec` and `ScheduleType` `schedule`."""
        values: dict[str, Any] = {}
        applied = self.schedule_kwargs(schedule) if schedule.sigma_function is not None else {}
        for name in ("sigma_min", "sigma_max", "rho"):
            if name in applied:
                values[INFOTEXT_KEYS[name]] = applied[name]
        if spec.name in CHURN_SAMPLERS:
            # A1111 writes each one that is not its default (tmax: infinity), churning or not
            for name, default in (("s_churn", 0.0), ("s_tmin", 0.0), ("s_noise", 1.0)):
                if getattr(self, name) != default:
                    values[INFOTEXT_KEYS[name]] = getattr(self, name)
            if self.tmax != math.inf:
                values[INFOTEXT_KEYS["s_tmax"]] = self.s_tmax
        elif spec.name in S_NOISE_SAMPLERS and self.s_noise != 1.0:
            values[INFOTEXT_KEYS["s_noise"]] = self.s_noise
        if self.always_discard_next_to_last_sigma and not spec.discard_penultimate_sigma and \
                schedule.sigma_function is not None:
            values[INFOTEXT_KEYS["always_discard_next_to_last_sigma"]] = True
        if self.sgm_noise_multiplier and is_k_diffusion_sampler(spec):
            values[INFOTEXT_KEYS["sgm_noise_multiplier"]] = True
        if spec.name == "UniPC":
            # A1111 reads these keys back (its options' infotext names) but writes none of them; without them an
            # image made at other values would not reproduce from its infotext, so they are written when changed.
            for name in UNIPC_OPTIONS:
                if getattr(self, name) != _DEFAULTS[name]:
                    values[INFOTEXT_KEYS[name]] = getattr(self, name)
        # A1111's `apply_alpha_schedule_override` records both for every sampler (each reads the model's schedule)
        if self.use_downcasted_alpha_bar:
            values[INFOTEXT_KEYS["use_downcasted_alpha_bar"]] = True
        if self.sd_noise_schedule != "Default":
            values[INFOTEXT_KEYS["sd_noise_schedule"]] = self.sd_noise_schedule
        return values

    @property
    def changes_alphas_cumprod(self) -> bool:
        """Whether sampling runs on other alphas_cumprod than the model's (Zero Terminal SNR, fp16 downcast)."""
        return self.use_downcasted_alpha_bar or self.sd_noise_schedule != "Default"

    @property
    def cond_padding(self) -> str | None:
        """How prompt and negative prompt of different lengths are made one length: "v0" (A1111 checks it first),
        "empty" (empty-prompt chunks) or None (each length run on its own)."""
        if self.pad_cond_uncond_v0:
            return "v0"
        return "empty" if self.pad_cond_uncond else None

    def initial_noise_factor(self, spec, scheduler) -> float:
        """What txt2img's initial noise scale is multiplied by: sqrt(1 + sigma_0^2) / sigma_0 (sigma_0: the
        scheduler's first sigma) with `sgm_noise_multiplier` for a k-diffusion sampler (A1111's
        `KDiffusionSampler.sample`), else 1."""
        if not self.sgm_noise_multiplier or not is_k_diffusion_sampler(spec):
            return 1.0
        first_sigma = float(scheduler.sigmas[0])
        return math.sqrt(1.0 + first_sigma**2) / first_sigma


def is_k_diffusion_sampler(spec) -> bool:
    """A1111 runs every sampler on k-diffusion's sigmas but its timestep samplers (DDIM, PLMS, UniPC), which take
    no schedule type."""
    return tuple(spec.schedule_types) != ("Automatic",)


# option -> (lowest, highest) value. A1111's Settings sliders where it has them (shared_options.py: s_churn 0..100,
# s_tmin 0..10, s_tmax 0..999, s_noise 0..1.1, the Beta shape 0.01..1, UniPC order 1..50); A1111's API takes any
# number, but far beyond them churn and its noise overflow to inf and NaN images, and a request must not ask the server
# for that. A1111's sigma_min, sigma_max and rho are free number boxes: their bounds here take every schedule a model
# has (Zero Terminal SNR's largest sigma is about 4500) and Karras' rho far past its usual 7.
RANGES: dict[str, tuple[float, float]] = {
    "sigma_min": (0.0, 5000.0), "sigma_max": (0.0, 5000.0), "rho": (0.0, 100.0),
    "s_churn": (0.0, 100.0), "s_tmin": (0.0, 10.0), "s_tmax": (0.0, 999.0), "s_noise": (0.0, 1.1),
    "beta_dist_alpha": (0.01, 1.0), "beta_dist_beta": (0.01, 1.0), "uni_pc_order": (1, 50),
}

OPTION_NAMES = tuple(f.name for f in fields(SamplerParameters))
NUMBERS = tuple(name for name in OPTION_NAMES if name not in (*FLAGS, *CHOICES, *INTEGERS))
_DEFAULTS = {f.name: f.default for f in fields(SamplerParameters)}


def beta_schedule_infotext(parameters: SamplerParameters | None, schedule_type: str) -> dict[str, float]:
    """The keys A1111 adds to every infotext made with its "Beta" schedule (both, default or not)."""
    if schedule_type != "Beta":
        return {}
    parameters = parameters or SamplerParameters()
    return {INFOTEXT_KEYS[name]: getattr(parameters, name) for name in BETA_PARAMETERS}


def check_sampler_parameters(parameters: Any) -> None:
    """Raise TypeError/ValueError naming the first bad setting (before any work)."""
    if not isinstance(parameters, SamplerParameters):
        raise TypeError("sampler_parameters must be a pipelines.sampler_parameters.SamplerParameters, got "
                        f"{type(parameters).__name__} {parameters!r}.")
    for name in NUMBERS:
        value = getattr(parameters, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number (A1111's Settings > Sampler parameters), got {value!r}.")
        low, high = RANGES[name]
        if name == "s_tmax" and value == math.inf:
            continue  # infinity, as A1111's 0 means
        if not (is_finite_number(value) and low <= value <= high):
            default = "0 keeps the sampler's default" if low == 0 else f"default {_DEFAULTS[name]}"
            raise ValueError(f"{name} must be a number in [{low:g}, {high:g}] ({default}; A1111's Settings > Sampler "
                             f"parameters), got {value!r}.")
    for name in FLAGS:
        if not isinstance(getattr(parameters, name), bool):
            raise TypeError(f"{name} must be True or False, got {getattr(parameters, name)!r}.")
    for name, choices in CHOICES.items():
        if getattr(parameters, name) not in choices:
            raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))} (A1111's choices), got "
                             f"{getattr(parameters, name)!r}.")
    order = parameters.uni_pc_order
    low, high = RANGES["uni_pc_order"]
    if isinstance(order, bool) or not isinstance(order, int) or not low <= order <= high:
        raise ValueError(f"uni_pc_order must be a whole number in [{low}, {high}] (A1111's slider; default 3), got "
                         f"{order!r}.")
    if parameters.sigma_min and parameters.sigma_max and parameters.sigma_min >= parameters.sigma_max:
        raise ValueError(f"sigma_min ({parameters.sigma_min}) must be below sigma_max ({parameters.sigma_max}); "
                         "set 0 for either to keep the model's own.")
    if parameters.s_tmin > parameters.tmax:
        raise ValueError(f"s_tmin ({parameters.s_tmin}) is above s_tmax ({parameters.s_tmax}): churn would never "
                         "apply; lower s_tmin or raise s_tmax (0 = infinity).")


def check_schedule_range(parameters: SamplerParameters, model_sigma_min: float, model_sigma_max: float) -> None:
    """Refuse bounds that, with the model's own for the other end, leave an empty or inverted range."""
    low = parameters.sigma_min or model_sigma_min
    high = parameters.sigma_max or model_sigma_max
    if low >= high:
        raise ValueError(f"the schedule would run from sigma_max {high:g} down to sigma_min {low:g}, which is not "
                         f"a range (the model's own range is {model_sigma_min:g} to {model_sigma_max:g}); set "
                         "sigma_min below sigma_max, or 0 to keep the model's.")


def parameters_from_values(values: dict[str, Any]) -> SamplerParameters:
    """SamplerParameters from option values (Settings, override_settings, a request); unknown keys are ignored.

    Strings ("0.5", "True": an infotext's spelling) are read as numbers and flags; anything else is checked as it is
    by `check_sampler_parameters`."""
    chosen: dict[str, Any] = {}
    for name in OPTION_NAMES:
        if name not in values or values[name] is None:
            continue
        value = values[name]
        if name in INTEGERS and isinstance(value, float) and value.is_integer():
            value = int(value)  # a JSON client's 3.0
        if isinstance(value, str) and name in CHOICES:
            value = value.strip()
        elif isinstance(value, str):
            text = value.strip()
            if name in INTEGERS:
                try:
                    value = as_integer(text)
                except ValueError:
                    raise ValueError(f"{name} must be a whole number, got {value!r}.") from None
            elif name in FLAGS:
                if text not in ("True", "False"):
                    raise ValueError(f"{name} must be True or False, got {value!r}.")
                value = text == "True"
            else:
                try:
                    value = float(text)
                except ValueError:
                    raise ValueError(f"{name} must be a number, got {value!r}.") from None
        chosen[name] = value
    return SamplerParameters(**chosen)


def from_infotext(written: dict[str, Any]) -> dict[str, Any]:
    """option name -> value for each of these settings an infotext's own keys record (A1111's keys)."""
    by_key = {**{key: name for name, key in INFOTEXT_KEYS.items()}, **INFOTEXT_ALIASES}
    return {by_key[key]: value for key, value in written.items() if key in by_key}


def check_sampler_parameters_for(parameters: Any, sampler: str, schedule_type: str = "Automatic") -> None:
    """`check_sampler_parameters`, then what the sampler cannot run. Settings a sampler does not read are ignored, as
    A1111 ignores them (churn with DPM++ 2M, bounds with "Uniform"), and are not written to its infotext."""
    check_sampler_parameters(parameters)
    from pipelines.samplers import SCHEDULE_TYPES, resolve_sampler

    spec, schedule = resolve_sampler(sampler, schedule_type)
    if parameters.always_discard_next_to_last_sigma and SCHEDULE_TYPES.get(schedule).sigma_function is None \
            and spec.name == "LCM":
        raise ValueError("always_discard_next_to_last_sigma=True with LCM and schedule type 'Automatic' (LCM's own "
                         "sigmas) is not supported here; pick a schedule type for LCM, or set it to False.")
