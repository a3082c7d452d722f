"""A1111's "Hires. fix" request fields -> HiresParams, shared by `POST /sdapi/v1/txt2img` and the web UI's Hires
controls, with the hires pass's own sampler and schedule (hr_sampler_name / hr_scheduler)."""

from __future__ import annotations

from pipelines.params import GenerationLimits, Txt2ImgParams
from webui.api_requests import Txt2ImgRequest

# A1111's txt2img request model declares denoising_strength 0.75 (0.7 is only its UI slider's start).
A1111_API_HIRES_DENOISING = 0.75


def hires_sampler_request(request: Txt2ImgRequest, sampler: str, schedule_type: str) -> dict[str, str | None]:
    """`hr_sampler` / `hr_schedule_type` for HiresParams from the request's hr_sampler_name / hr_scheduler; None where
    they mean the first pass's.

    A1111 runs its hires pass with `hr_sampler_name or sampler_name` and `hr_scheduler or scheduler`, where
    "Automatic" is the sampler's own default schedule (`sd_samplers_kdiffusion.get_sigmas`: `if scheduler_name ==
    'Automatic': scheduler_name = self.config.options.get('scheduler')`); its UI sends "Use same sampler" / "Use same
    scheduler" for "the first pass's". A pair that resolves to exactly what the first pass runs (an alias, a pre-1.9
    name, "Automatic" when that is the first pass's schedule) is the same run and becomes None, so the params equal
    those of a request without it. An unknown name raises ValueError naming the field and the valid names.
    """
    from pipelines.hires import HiresParams
    from pipelines.hires_sampler import SAME_SAMPLER, SAME_SCHEDULER, hires_sampler_choice, hires_sampler_names
    from pipelines.samplers import resolve_sampler

    hr_sampler, hr_schedule = hires_sampler_choice(request.hr_sampler_name, request.hr_scheduler)
    if hr_sampler is None and hr_schedule is None:
        return {"hr_sampler": None, "hr_schedule_type": None}
    chosen = HiresParams(sampler=sampler, schedule_type=schedule_type, hr_sampler=hr_sampler,
                         hr_schedule_type=hr_schedule)
    try:
        hires = resolve_sampler(*hires_sampler_names(chosen))
    except (KeyError, ValueError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else str(error)
        given = ", ".join(f"{name}={value!r}" for name, value in (("hr_sampler_name", hr_sampler),
                                                                  ("hr_scheduler", hr_schedule)) if value is not None)
        raise ValueError(f"{given} (infotext: Hires sampler / Hires schedule type): {message}; send "
                         f"{SAME_SAMPLER!r} / {SAME_SCHEDULER!r} (or leave them out) for the first pass's.") from None
    if hires == resolve_sampler(sampler, schedule_type):
        return {"hr_sampler": None, "hr_schedule_type": None}
    return {"hr_sampler": hr_sampler, "hr_schedule_type": hr_schedule}


def hires_prompts(request: Txt2ImgRequest, styles) -> dict[str, str]:
    """hr_prompt / hr_negative_prompt ("" = the first pass's), styled as A1111 styles `all_hr_prompts` too."""
    hr_prompt, hr_negative = request.hr_prompt or "", request.hr_negative_prompt or ""
    if request.styles and styles is not None and (hr_prompt or hr_negative):
        hr_prompt, hr_negative = styles.apply(hr_prompt or request.prompt, hr_negative or request.negative_prompt,
                                              list(request.styles))
    return {"hr_prompt": hr_prompt, "hr_negative_prompt": hr_negative}


def settings_eta(hires_eta):
    """The Settings etas `hires_eta(sampler)` gives, by kind, for a hires sampler chosen later (an X/Y/Z "Hires
    sampler" cell); None when it gives none (the request sent `eta`, which serves every sampler)."""
    from pipelines.hires_sampler import SettingsEta

    # one sampler of each kind: Euler a reads eta_ancestral, DDIM eta_ddim (SettingsEta.for_sampler)
    ancestral, ddim = hires_eta("Euler a"), hires_eta("DDIM")
    return None if ancestral is None or ddim is None else SettingsEta(ancestral=ancestral, ddim=ddim)


def hires_params(request: Txt2ImgRequest, params: Txt2ImgParams, limits: GenerationLimits, styles=None,
                 refiner_pass: str = "second pass", hires_eta=None, token_merging_ratio_hr: float = 0.0):
    """A1111's "Hires. fix" fields -> HiresParams (first pass at width x height, then upscale and refine);
    `refiner_pass` is the Settings' (or override's) `hires_fix_refiner_pass`; `hires_eta(sampler)` gives the eta
    Settings give a hires sampler other than the first pass's (A1111's eta_ddim / eta_ancestral by its kind), and
    `settings_eta` keeps both for a hires sampler an X/Y/Z plot picks per cell. `token_merging_ratio_hr` is the
    Settings' (or override's) ToMe ratio of the hires pass (0: the first pass's)."""
    from pipelines.hires import HiresParams, check_hires_params

    # No hr_upscaler: A1111 upscales with "Latent" and writes no "Hires upscaler" key (HiresParams takes None so).
    hires = HiresParams(
        **{f: getattr(params, f) for f in params.__dataclass_fields__},
        hr_scale=request.hr_scale, hr_resize_x=request.hr_resize_x, hr_resize_y=request.hr_resize_y,
        hr_upscaler=request.hr_upscaler or None, hr_second_pass_steps=request.hr_second_pass_steps,
        denoising_strength=(A1111_API_HIRES_DENOISING if request.denoising_strength is None
                            else request.denoising_strength),
        **hires_prompts(request, styles), hires_fix_refiner_pass=refiner_pass,
        token_merging_ratio_hr=token_merging_ratio_hr,
        **hires_sampler_request(request, params.sampler, params.schedule_type),
    )
    if hires_eta is not None:
        if hires.hr_sampler is not None:
            hires.hr_eta = hires_eta(hires.hr_sampler)
        hires.settings_eta = settings_eta(hires_eta)
    check_hires_params(hires, limits, 8)
    return hires
