"""A1111's "Hires. fix" request fields -> HiresParams, shared by `POST /sdapi/v1/txt2img` and the web UI's Hires
controls, and the check that a request's hires sampler and schedule are the first pass's (the only ones run here)."""

from __future__ import annotations

from pipelines.params import GenerationLimits, Txt2ImgParams
from webui.api_requests import Txt2ImgRequest

# A1111's txt2img request model declares denoising_strength 0.75 (0.7 is only its UI slider's start).
A1111_API_HIRES_DENOISING = 0.75

# The hires fields' "off" values, A1111's UI labels for "the first pass's".
SAME_SAMPLER, SAME_SCHEDULER = "Use same sampler", "Use same scheduler"


def hires_sampler_differences(request: Txt2ImgRequest, sampler: str, schedule_type: str) -> list[str]:
    """Why the request's hr_sampler_name / hr_scheduler cannot be run: this server's hires pass always runs the
    first pass's sampler and schedule. Empty when they name those (after resolving aliases and "Automatic").

    A1111 runs its hires pass with `hr_sampler_name or sampler_name` and `hr_scheduler or scheduler`, where
    "Automatic" is the sampler's own default schedule (`sd_samplers_kdiffusion.get_sigmas`: `if scheduler_name ==
    'Automatic': scheduler_name = self.config.options.get('scheduler')`). So hr_sampler_name equal to the first
    pass's sampler, or a schedule that resolves to the first pass's, is the same run (A1111 then writes no
    "Hires sampler" / "Hires schedule type" key), while "Automatic" after a first pass on another schedule is not.
    """
    from pipelines.samplers import resolve_sampler

    hr_sampler = request.hr_sampler_name if request.hr_sampler_name not in (None, "", SAME_SAMPLER) else None
    hr_schedule = request.hr_scheduler if request.hr_scheduler not in (None, "", SAME_SCHEDULER) else None
    if hr_sampler is None and hr_schedule is None:
        return []
    first_spec, first_schedule = resolve_sampler(sampler, schedule_type)
    try:
        hires_spec, hires_schedule = resolve_sampler(hr_sampler or sampler, hr_schedule or schedule_type)
    except (ValueError, KeyError) as error:
        hires_spec, hires_schedule, why = None, None, f" is not usable here ({error})"
    else:
        why = ""
    if (hires_spec, hires_schedule) == (first_spec, first_schedule):
        return []
    differences = []
    if hr_sampler is not None and (hires_spec is None or hires_spec.name != first_spec.name):
        differences.append(f"hr_sampler_name={hr_sampler!r} (infotext: Hires sampler){why}: this server's hires pass "
                           f"always runs the first pass's sampler, {first_spec.name}; send {SAME_SAMPLER!r} or "
                           f"{first_spec.name!r}, or leave it out")
    elif hr_schedule is not None:
        runs = repr(hr_schedule) + (f" is schedule {hires_schedule} for {first_spec.name}" if hires_spec else "")
        differences.append(f"hr_scheduler={runs} (infotext: Hires schedule type){why}: this server's hires pass "
                           f"always runs the first pass's schedule, {first_schedule}; send {SAME_SCHEDULER!r} or "
                           f"{first_schedule!r}, or leave it out")
    else:  # an old-style hires sampler name carrying another schedule ("DPM++ 2M Exponential")
        differences.append(f"hr_sampler_name={hr_sampler!r} (infotext: Hires sampler) runs schedule {hires_schedule}: "
                           f"this server's hires pass always runs the first pass's schedule, {first_schedule}; send "
                           f"{SAME_SAMPLER!r} or {first_spec.name!r}, or leave it out")
    return differences


def hires_prompts(request: Txt2ImgRequest, styles) -> dict[str, str]:
    """hr_prompt / hr_negative_prompt ("" = the first pass's), styled as A1111 styles `all_hr_prompts` too."""
    hr_prompt, hr_negative = request.hr_prompt or "", request.hr_negative_prompt or ""
    if request.styles and styles is not None and (hr_prompt or hr_negative):
        hr_prompt, hr_negative = styles.apply(hr_prompt or request.prompt, hr_negative or request.negative_prompt,
                                              list(request.styles))
    return {"hr_prompt": hr_prompt, "hr_negative_prompt": hr_negative}


def hires_params(request: Txt2ImgRequest, params: Txt2ImgParams, limits: GenerationLimits, styles=None,
                 refiner_pass: str = "second pass"):
    """A1111's "Hires. fix" fields -> HiresParams (first pass at width x height, then upscale and refine);
    `refiner_pass` is the Settings' (or override's) `hires_fix_refiner_pass`."""
    from pipelines.hires import HiresParams, check_hires_params

    # No hr_upscaler: A1111 upscales with "Latent" and writes no "Hires upscaler" key (HiresParams takes None so).
    hires = HiresParams(
        **{f: getattr(params, f) for f in params.__dataclass_fields__},
        hr_scale=request.hr_scale, hr_resize_x=request.hr_resize_x, hr_resize_y=request.hr_resize_y,
        hr_upscaler=request.hr_upscaler or None, hr_second_pass_steps=request.hr_second_pass_steps,
        denoising_strength=(A1111_API_HIRES_DENOISING if request.denoising_strength is None
                            else request.denoising_strength),
        **hires_prompts(request, styles), hires_fix_refiner_pass=refiner_pass,
    )
    check_hires_params(hires, limits, 8)
    return hires
