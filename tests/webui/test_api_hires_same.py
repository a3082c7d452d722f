"""hr_sampler_name / hr_scheduler that name what the first pass runs are "the same" and accepted; others are refused
with a message naming the field, the infotext key and what to send.

A1111 reference (1.10): `processing.StableDiffusionProcessingTxt2Img.sample_hr_pass` runs the hires pass with
`self.hr_sampler_name or self.sampler_name`; `init` writes "Hires sampler" only `if self.hr_sampler_name is not None
and self.hr_sampler_name != self.sampler_name`, and sets `hr_scheduler = scheduler` when it is None;
`sd_samplers_kdiffusion.get_sigmas` takes `(p.hr_scheduler if p.is_hr_pass else p.scheduler) or 'Automatic'` and
reads "Automatic" as the sampler's own default schedule (`self.config.options.get('scheduler')`), so "Automatic" is
the first pass's schedule only when that resolves to the same one.
"""

from __future__ import annotations

import pytest

from pipelines.hires import HiresParams
from pipelines.params import GenerationLimits
from webui.api_convert import to_txt2img_params
from webui.api_infotext import apply_infotext
from webui.api_requests import Txt2ImgRequest

HIRES = dict(enable_hr=True, hr_scale=2.0, hr_second_pass_steps=3, denoising_strength=0.5, steps=4, width=64,
             height=64, seed=1)


def _params(**fields):
    request = apply_infotext(Txt2ImgRequest(**{**HIRES, **fields}))
    return to_txt2img_params(request, limits=GenerationLimits(), lora_names=None)


@pytest.mark.parametrize("fields", [
    {"sampler_name": "Euler", "hr_sampler_name": "Euler"},
    {"sampler_name": "Euler", "hr_sampler_name": "k_euler"},  # an alias of the same sampler
    {"sampler_name": "DPM++ 2M", "scheduler": "Karras", "hr_scheduler": "Karras"},
    {"sampler_name": "DPM++ 2M", "hr_scheduler": "Karras"},  # DPM++ 2M's Automatic is Karras
    {"sampler_name": "DPM++ 2M", "scheduler": "Karras", "hr_scheduler": "Automatic"},
    {"hr_scheduler": "Automatic"},  # A1111's API defaults: Euler, Automatic
    {"sampler_name": "DPM++ 2M", "hr_sampler_name": "DPM++ 2M Karras"},  # pre-1.9 name, same sampler and schedule
    {"sampler_name": "DDIM", "hr_scheduler": "Karras"},  # A1111's timestep samplers ignore the schedule type
    {"sampler_name": "Euler", "hr_sampler_name": "Use same sampler", "hr_scheduler": "Use same scheduler"},
], ids=lambda fields: ",".join(f"{k}={v}" for k, v in fields.items()))
def test_hires_sampler_and_schedule_naming_the_first_pass_are_accepted(fields):
    params = _params(**fields)
    first = {k: v for k, v in fields.items() if k in ("sampler_name", "scheduler")}
    assert isinstance(params, HiresParams)
    assert params == _params(**first)  # exactly the run without them


@pytest.mark.parametrize(("fields", "expected"), [
    ({"sampler_name": "Euler", "hr_sampler_name": "DPM++ 2M"},
     "hr_sampler_name='DPM++ 2M' (infotext: Hires sampler): this server's hires pass always runs the first pass's "
     "sampler, Euler; send 'Use same sampler' or 'Euler', or leave it out"),
    ({"sampler_name": "Euler", "hr_scheduler": "Karras"},
     "hr_scheduler='Karras' is schedule Karras for Euler (infotext: Hires schedule type): this server's hires pass "
     "always runs the first pass's schedule, Uniform; send 'Use same scheduler' or 'Uniform', or leave it out"),
    ({"sampler_name": "DPM++ 2M", "scheduler": "Exponential", "hr_scheduler": "Automatic"},
     "hr_scheduler='Automatic' is schedule Karras for DPM++ 2M"),
    ({"sampler_name": "DPM++ 2M", "hr_sampler_name": "DPM++ 2M Exponential"},
     "hr_sampler_name='DPM++ 2M Exponential' (infotext: Hires sampler) runs schedule Exponential"),
    ({"hr_scheduler": "Sideways"}, "Unknown schedule type 'Sideways'"),
], ids=["other-sampler", "other-schedule", "automatic-is-another-schedule", "old-name-other-schedule", "unknown"])
def test_another_hires_sampler_or_schedule_is_refused_saying_what_to_send(fields, expected):
    with pytest.raises(ValueError) as refused:
        _params(**fields)
    assert str(refused.value).startswith("Not supported by this server: ") and expected in str(refused.value)


def test_an_infotexts_hires_schedule_type_is_read_and_checked_not_dropped():
    text = ("a cat\nSteps: 4, Sampler: Euler, Schedule type: Automatic, CFG scale: 7, Seed: 1, Size: 64x64, "
            "Denoising strength: 0.5, Hires upscale: 2, Hires steps: 3, Hires upscaler: Latent")
    assert apply_infotext(Txt2ImgRequest(infotext=text + ", Hires schedule type: Karras")).hr_scheduler == "Karras"
    with pytest.raises(ValueError, match="infotext: Hires schedule type"):
        to_txt2img_params(apply_infotext(Txt2ImgRequest(infotext=text + ", Hires schedule type: Karras")),
                          limits=GenerationLimits(), lora_names=None)
    same = apply_infotext(Txt2ImgRequest(infotext=text + ", Hires schedule type: Uniform, Hires sampler: Euler"))
    plain = apply_infotext(Txt2ImgRequest(infotext=text))
    assert (to_txt2img_params(same, limits=GenerationLimits(), lora_names=None)
            == to_txt2img_params(plain, limits=GenerationLimits(), lora_names=None))


def test_without_hires_fix_the_hires_fields_are_not_looked_at():
    # A1111 sends its hires fields with every txt2img request, hires fix on or not.
    plain = to_txt2img_params(Txt2ImgRequest(steps=4, width=64, height=64, hr_sampler_name="DPM++ 2M"),
                              limits=GenerationLimits(), lora_names=None)
    assert not isinstance(plain, HiresParams)
