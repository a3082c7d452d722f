"""Text-to-image for SD 1.x / 2.x / SDXL with the WebUI's semantics (samplers, seeds, prompts, infotext)."""

from __future__ import annotations

from pipelines.base import BatchStart, DiffusionPipelineBase
from pipelines.inpaint_mask import full_mask_channels
from pipelines.instruct_pix2pix import refuse_text_to_image
from pipelines.params import Txt2ImgParams, check_txt2img_params
from pipelines.samplers import initial_noise_scale


class TextToImage(DiffusionPipelineBase):
    """Generate images from text; one instance per loaded model, reusable across calls.

    `TextToImage.from_pretrained(source)` loads a diffusers folder, a single-file checkpoint or a
    hub id. Calling the pipeline takes a `Txt2ImgParams` or the same fields as keywords.
    """

    params_class = Txt2ImgParams

    def check_inputs(self, params: Txt2ImgParams) -> None:
        refuse_text_to_image(self.model)
        check_txt2img_params(params, self.limits, self.model.vae_scale_factor)

    def _start_batch(self, params: Txt2ImgParams, state, sampler, generators: list, first_image: int) -> BatchStart:
        schedulers = sampler.make_schedulers(generators, params.steps, self.model.device)
        noise = self._initial_noise(params, generators, first_image)
        # An inpainting (9-channel) UNet gets A1111's txt2img conditioning: a full mask over a blank image.
        extra = full_mask_channels(self.model, len(generators), self._latent_shape(params))
        # A sampler walking its own grid (A1111's UniPC) may run more steps than asked: progress counts those.
        scale = initial_noise_scale(schedulers[0])
        if sampler.parameters is not None:  # A1111's "SGM noise multiplier"
            from pipelines.samplers import SAMPLERS

            scale *= sampler.parameters.initial_noise_factor(SAMPLERS.get(sampler.name), schedulers[0])
        return BatchStart(latents=noise * scale, schedulers=schedulers, extra_channels=extra,
                          steps=getattr(schedulers[0], "run_steps", None))
