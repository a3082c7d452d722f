"""The samplers of AUTOMATIC1111 WebUI v1.10, by their WebUI names, as diffusers recipes.

Defaults follow A1111's `modules/sd_samplers_kdiffusion.py`: a sampler's `options["scheduler"]`
is what "Automatic" means for it (DPM++ 2M, DPM++ SDE, DPM2, DPM2 a -> Karras; DPM++ 2M SDE ->
Exponential); samplers without that option use the model's own (uniform) timesteps. DDIM, PLMS
and UniPC come from A1111's timestep samplers, which ignore schedule types, so they only offer
"Automatic". LCM is A1111's own (lcm.py): a k-diffusion sampler over LCM's 50 distilled sigmas, which
takes every schedule type.

"DPM++ 2S a" uses mixkit's own scheduler (dpmpp_2s_ancestral.py): diffusers'
DPMSolverSinglestepScheduler is not ancestral (adds no noise). So does "Euler a"
(euler_ancestral.py): diffusers' EulerAncestralDiscreteScheduler has no schedule switches.

"KL Optimal" ends at sigma_min in A1111; the samplers whose diffusers class has no
`final_sigmas_type` (LMS, Heun, DPM2, DPM2 a, DPM++ 2S a, DPM++ SDE) end it at 0 instead.

"DPM++ 3M SDE" is mixkit's own (dpmpp_3m_sde.py): diffusers' third-order "sde-dpmsolver++" update
weights the second difference by (..) - 0.5 where k-diffusion's `sample_dpmpp_3m_sde` uses (..) + 0.5.
"Restart" (restart.py) and "DPM fast" (dpm_fast.py) have no diffusers counterpart; their model calls are
planned from the schedule ahead of sampling (planned_walk.py). "DPM adaptive" (dpm_adaptive.py) decides each call
as it goes, from its error estimate over the batch. "DDIM CFG++" (ddim_cfgpp.py) is A1111's DDIM renoised with the
unconditional prediction, which the denoising loop hands it apart from the guided one.

Unknown here: "Heun PP2" (later A1111 versions).
"""

from __future__ import annotations

from mixkit.registry import Registry

from pipelines.samplers.spec import SamplerSpec

SAMPLERS: Registry[SamplerSpec] = Registry("sampler")

# A1111 1.10's schedule types, in its order. DDIM, PLMS and UniPC take none (A1111 ignores them).
_K_SCHEDULES = (
    "Automatic", "Uniform", "Karras", "Exponential", "Polyexponential", "SGM Uniform", "KL Optimal",
    "Align Your Steps", "Simple", "Normal", "DDIM", "Beta",
)

_DPMPP_MULTISTEP = {
    "solver_order": 2,
    "solver_type": "midpoint",
    # k-diffusion drops to first order only on the first step and on the step to sigma=0;
    # diffusers' `lower_order_final` would also lower the second-to-last step below 15 steps.
    "lower_order_final": False,
    "euler_at_final": False,
    "final_sigmas_type": "zero",
    "thresholding": False,
}


def _register(spec: SamplerSpec) -> None:
    SAMPLERS.register(spec.name, spec)


_register(SamplerSpec(
    "DPM++ 2M", "DPMSolverMultistepScheduler", aliases=("k_dpmpp_2m",),
    config_overrides={"algorithm_type": "dpmsolver++", **_DPMPP_MULTISTEP},
    schedule_types=_K_SCHEDULES, default_schedule="Karras",
    notes="diffusers rounds the model timesteps of Karras/Exponential sigmas to integers.",
))
_register(SamplerSpec(
    # mixkit's subclass (dpmpp_sde.py): diffusers' class runs eta 1 only
    "DPM++ SDE", "DPMSolverSDEEtaScheduler", aliases=("k_dpmpp_sde",),
    eta_default=1.0,
    schedule_types=_K_SCHEDULES, default_schedule="Karras",
    stochastic=True, second_order=True, noise_source="brownian_seeds", requires=("torchsde",),
))
_register(SamplerSpec(
    # mixkit's (dpmpp_2m_sde.py): diffusers' multistep SDE with k-diffusion's Brownian-tree noise, as A1111.
    "DPM++ 2M SDE", "BrownianDPMSolverMultistepScheduler", aliases=("k_dpmpp_2m_sde",),
    eta_default=1.0,
    config_overrides={"algorithm_type": "sde-dpmsolver++", **_DPMPP_MULTISTEP},
    schedule_types=_K_SCHEDULES, default_schedule="Exponential",
    stochastic=True, noise_source="brownian_seeds", requires=("torchsde",),
))
_register(SamplerSpec(
    "DPM++ 2M SDE Heun", "BrownianDPMSolverMultistepScheduler", aliases=("k_dpmpp_2m_sde_heun",),
    eta_default=1.0,
    config_overrides={"algorithm_type": "sde-dpmsolver++", **_DPMPP_MULTISTEP, "solver_type": "heun"},
    schedule_types=_K_SCHEDULES, default_schedule="Exponential",
    stochastic=True, noise_source="brownian_seeds", requires=("torchsde",),
))
_register(SamplerSpec(
    "DPM++ 2S a", "DPMSolverPlusPlus2SAncestralScheduler", aliases=("k_dpmpp_2s_a",),
    eta_default=1.0,
    schedule_types=_K_SCHEDULES, default_schedule="Karras",
    stochastic=True, ancestral=True, second_order=True, noise_source="generator",
))
_EULER = {"interpolation_type": "linear", "timestep_type": "discrete", "final_sigmas_type": "zero"}
_register(SamplerSpec(
    # mixkit's own (dpmpp_3m_sde.py); A1111: Exponential by default, penultimate sigma discarded, Brownian tree
    "DPM++ 3M SDE", "BrownianDPMSolverPlusPlus3MSDEScheduler", aliases=("k_dpmpp_3m_sde",),
    eta_default=1.0,
    config_overrides=_EULER, schedule_types=_K_SCHEDULES, default_schedule="Exponential",
    stochastic=True, noise_source="brownian_seeds", requires=("torchsde",), discard_penultimate_sigma=True,
))
_register(SamplerSpec(
    # mixkit's own (euler_ancestral.py): diffusers' ancestral Euler has no Karras/Exponential switch.
    "Euler a", "EulerAncestralAnyScheduleScheduler", aliases=("k_euler_a", "k_euler_ancestral"),
    eta_default=1.0,
    config_overrides=_EULER, schedule_types=_K_SCHEDULES, default_schedule="Uniform",
    stochastic=True, ancestral=True, noise_source="generator",
))
_register(SamplerSpec(
    "Euler", "EulerDiscreteScheduler", aliases=("k_euler",),
    config_overrides=_EULER, schedule_types=_K_SCHEDULES, default_schedule="Uniform",
))
_register(SamplerSpec(
    "LMS", "LMSScheduler", aliases=("k_lms",),  # mixkit's (lms.py): img2img's first steps at the right order
    schedule_types=_K_SCHEDULES, default_schedule="Uniform", requires=("scipy",),
))
_register(SamplerSpec(
    "Heun", "HeunDiscreteScheduler", aliases=("k_heun",), config_overrides={"clip_sample": False},
    schedule_types=_K_SCHEDULES, default_schedule="Uniform", second_order=True,
))
_register(SamplerSpec(
    "DPM2", "KDPM2DiscreteScheduler", aliases=("k_dpm_2",),
    schedule_types=_K_SCHEDULES, default_schedule="Karras", second_order=True, discard_penultimate_sigma=True,
))
_register(SamplerSpec(
    # mixkit's subclass (dpm2_ancestral.py): diffusers' class has no eta
    "DPM2 a", "KDPM2AncestralEtaScheduler", aliases=("k_dpm_2_a",),
    eta_default=1.0,
    schedule_types=_K_SCHEDULES, default_schedule="Karras",
    stochastic=True, ancestral=True, second_order=True, noise_source="generator", discard_penultimate_sigma=True,
))
_register(SamplerSpec(
    # mixkit's own (dpm_fast.py): one model call per step, ancestral at A1111's eta (1 by default). A1111 gives it
    # no scheduler option: the schedule type sets txt2img's initial noise and img2img's sigma range only.
    "DPM fast", "DPMFastScheduler", aliases=("k_dpm_fast",),
    eta_default=1.0,
    config_overrides=_EULER, schedule_types=_K_SCHEDULES, default_schedule="Uniform",
    stochastic=True, ancestral=True, noise_source="generator",
))
_register(SamplerSpec(
    # mixkit's own (dpm_adaptive.py): model calls decided by its error control, ancestral at A1111's eta (1 by
    # default); like DPM fast it takes no scheduler option and runs over A1111's sigma range.
    "DPM adaptive", "DPMAdaptiveScheduler", aliases=("k_dpm_ad",),
    eta_default=1.0,
    config_overrides=_EULER, schedule_types=_K_SCHEDULES, default_schedule="Uniform",
    stochastic=True, ancestral=True, noise_source="generator",
))
_register(SamplerSpec(
    # mixkit's own (restart.py): A1111's sd_samplers_extra.restart_sampler, Karras by default, Heun's call count
    # (2 * steps - 1), restart noise from the image's generator; A1111 passes it neither eta nor s_noise.
    "Restart", "RestartScheduler", aliases=("restart",),
    config_overrides=_EULER, schedule_types=_K_SCHEDULES, default_schedule="Karras",
    stochastic=True, second_order=True, noise_source="generator",
))
_register(SamplerSpec(
    "DDIM", "A1111DDIMScheduler", aliases=("ddim",),
    eta_default=0.0, eta_infotext_key="Eta DDIM",
    # A1111's own walk (a1111_timesteps.py): grid range(0, 1000, 1000 // steps) + 1, calls from the top but
    # one, ending at t = 1; eta 0, no clipping.
    config_overrides={"set_alpha_to_one": False, "clip_sample": False, "thresholding": False},
    max_steps=999, min_steps=2, mask_before_denoising=True,
))
_register(SamplerSpec(
    # mixkit's subclass of A1111's DDIM (ddim_cfgpp.py): renoises with the unconditional prediction, CFG scale / 12.5
    "DDIM CFG++", "A1111DDIMCFGPPScheduler", aliases=("ddim_cfgpp",),
    eta_default=0.0, eta_infotext_key="Eta DDIM",  # A1111 passes its eta_ddim to ddim_cfgpp too
    config_overrides={"set_alpha_to_one": False, "clip_sample": False, "thresholding": False},
    max_steps=999, min_steps=2, mask_before_denoising=True,  # as DDIM
))
_register(SamplerSpec(
    "PLMS", "A1111PLMSScheduler", aliases=("plms",),
    config_overrides={"set_alpha_to_one": False, "clip_sample": False, "thresholding": False},
    max_steps=999, min_steps=2, mask_before_denoising=True,  # as DDIM
))
_register(SamplerSpec(
    # mixkit's subclass (a1111_unipc.py): diffusers' UniPC update on A1111's grid, len(range(0, 1000, 1000 // steps))
    # time-uniform steps at fractional model times, and A1111's img2img start.
    "UniPC", "A1111UniPCScheduler", aliases=("unipc",),
    # A1111 defaults: variant bh1, order 3, lower_order_final, skip type time_uniform (t 999 -> 0)
    # ending *at* t=0, i.e. sigma_min, not sigma 0 (bh1 stepping to sigma 0 also gives NaN).
    config_overrides={
        "solver_type": "bh1", "solver_order": 3, "predict_x0": True, "lower_order_final": True,
        "timestep_spacing": "linspace", "final_sigmas_type": "sigma_min", "thresholding": False,
    },
    max_steps=999,
    mask_before_denoising=True,  # a timestep sampler in A1111
))
_register(SamplerSpec(
    "LCM", "A1111LCMScheduler", aliases=("k_lcm",),
    # A1111's sd_samplers_lcm (lcm.py): 4 steps call the model at 999, 679, 339, 19 (diffusers' LCMScheduler:
    # 999, 759, 499, 259); its schedule types apply over the 50 distilled sigmas.
    schedule_types=_K_SCHEDULES,
    stochastic=True, noise_source="generator",
))

# A1111 samplers mixkit cannot run as A1111 does, by name and alias (casefolded): why, and what to use instead.
# None at present (DPM adaptive and DDIM CFG++ were, until mixkit ran them); `refusal_reason` stays for the next one.
REFUSED_SAMPLERS: dict[str, str] = {}

_ALIASES = {alias.casefold(): name for name, spec in SAMPLERS.items() for alias in spec.aliases}


def refusal_reason(name: str) -> str | None:
    """Why the A1111 sampler `name` (any case, also with an old-style schedule suffix) is refused, or None."""
    key = name.casefold()
    for refused, reason in REFUSED_SAMPLERS.items():
        if key == refused or key.startswith((refused + " ", refused + "_")):
            return reason
    return None


def find_sampler(name: str) -> SamplerSpec | None:
    """The sampler called `name` (WebUI name or alias, any case), or None."""
    if not isinstance(name, str):
        return None
    if name in SAMPLERS or name.casefold() in {n.casefold() for n in SAMPLERS}:
        return SAMPLERS.get(name)
    canonical = _ALIASES.get(name.casefold())
    return SAMPLERS.get(canonical) if canonical else None
