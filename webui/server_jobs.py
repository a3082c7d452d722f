"""The generation jobs a running server queues (txt2img, img2img, outpaint, Extras upscale), the checks they get
first, and the UI session's Interrupt/Skip.

A mixin of `ServerState` (which sets the attributes declared below). The API and the UI both submit
here, so the UI cannot queue anything the API would refuse, and a generation job's refiner config mismatch is
explained in request terms for both (`webui.refiner_config_folders.refiner_errors_in_web_terms`).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from webui.generation_jobs import generation_job, outpaint_job
from webui.prompt_guard import check_hypernetwork_tags, check_prompt_networks, check_tag_syntax
from webui.refiner_config_folders import refiner_errors_in_web_terms
from webui.worker import ANY_OWNER, Job

if TYPE_CHECKING:
    from pipelines.params import GenerationLimits
    from webui.checkpoints import CheckpointCatalog
    from webui.controlnet_models import ControlNetModels
    from webui.model_switch import ModelHolder
    from webui.worker import GenerationWorker


class ServerJobs:
    """Besides the attributes below, uses `lora_names` and `hypernetwork_library` (PromptLibraries) and
    `requested_checkpoint` (ServerModels)."""

    catalog: CheckpointCatalog | None  # the server's checkpoints: a refiner error's advice lists its diffusers folders
    controlnets: ControlNetModels | None
    holder: ModelHolder
    limits: GenerationLimits
    worker: GenerationWorker

    def check_params(self, kind: str, params) -> None:
        """The checks the API applies, for params built elsewhere (the UI, a script's planned calls): limits, the
        hires fields (a hires-fix call), sampler, LoRA tags."""
        from pipelines.params import check_txt2img_params
        from pipelines.samplers import resolve_sampler

        if kind == "img2img":
            from pipelines.img2img import check_img2img_params

            check_img2img_params(params, self.limits, 8)
        else:
            check_txt2img_params(params, self.limits)
            from pipelines.hires import HiresParams, check_hires_params

            if isinstance(params, HiresParams):  # an X/Y/Z cell's Hires steps or Denoising, not only the request's
                check_hires_params(params, self.limits, 8)
        resolve_sampler(params.sampler, params.schedule_type)
        model = self.holder.loaded_model()
        if model is not None:  # the UI slider goes to 12; a 3-layer text encoder must refuse 4 here, not in the queue
            from mixkit.prompts.encoder import text_encoder_layers

            layers = text_encoder_layers(model.text_encoders)
            if params.clip_skip > layers:
                raise ValueError(f"clip_skip {params.clip_skip} is more than the loaded model's text encoder has "
                                 f"layers ({layers}); use 1..{layers}")
        # Only the prompt's tags are extra networks: A1111 1.10 parses them out of the prompts alone, so a tag in the
        # negative prompt is text there (the pipeline warns that it is not applied), malformed or not.
        names = self.lora_names((params.prompt,))
        prompts = params.prompt
        for text in [prompts] if isinstance(prompts, str) else prompts:
            check_prompt_networks("prompt", text, names)
            check_tag_syntax("prompt", text)
            check_hypernetwork_tags("prompt", text, self.hypernetwork_library)

    def cancel_session(self, session: str) -> int:
        """A UI session ended (its tab closed or reloaded): drop its queued jobs and interrupt its running one,
        except txt2img/img2img generations, which the reloaded page reattaches to by task id (`webui.ui_tasks`)."""
        return self.worker.end_session(session)

    def interrupt_session(self, session: str | None) -> int:
        """The UI's Interrupt: the caller's own jobs only (queued ones are dropped, a running one returns what it
        has); another session's job is never touched. Returns how many jobs were hit."""
        return self.worker.cancel_session(session)

    def skip_session(self, session: str | None) -> bool:
        """The UI's Skip: end the current batch of the caller's running job; False when it has none running.

        A queued job is left alone: A1111 clears the skip flag when a job starts, so a Skip pressed before that
        has no effect there either."""
        return self.worker.skip_session(session)

    def submit_generation(self, kind: str, params, *, save: bool, session: str | None = None,
                          owner: str | None = None, checkpoint: str | None = None,
                          restore_checkpoint: bool = True, keep_on_disconnect: bool = False,
                          writing=None) -> Job:
        """Queue a txt2img/img2img call with already validated params; raises QueueFullError, and ValueError for a
        ControlNet unit or IP-Adapter made for another model family than the job's checkpoint (before anything is
        queued).

        `checkpoint` (A1111's override_settings.sd_model_checkpoint, any title it accepts) runs the job on that
        checkpoint, and the server's is put back afterwards unless `restore_checkpoint` is false
        (`webui.request_checkpoint`); an unknown title raises ValueError listing the checkpoints.
        `keep_on_disconnect`: the session ending does not cancel it (a UI task a reloaded page reattaches to).
        `writing`: where saved images' infotexts go (`pipelines.png.InfotextWriting`; None: as the Settings are now).
        """
        if kind not in ("txt2img", "img2img"):
            raise ValueError(f"kind must be 'txt2img' or 'img2img', got {kind!r}.")
        entry = self.requested_checkpoint(checkpoint)
        if getattr(params, "controlnets", None) and self.controlnets is not None:
            from webui.controlnet_models import check_unit_families

            check_unit_families(self.controlnets, params.controlnets, self.holder, entry)
        if getattr(params, "ip_adapter", None):
            from webui.api_ip_adapter import check_ip_adapter_families

            store = self.controlnets.ip_adapters if self.controlnets is not None else None
            check_ip_adapter_families(params.ip_adapter, self.holder, entry, store)
        job = refiner_errors_in_web_terms(
            generation_job(self, kind, params, save=save, checkpoint=entry, restore_checkpoint=restore_checkpoint,
                           writing=writing or self.options.infotext_writing()), self.catalog)
        return self.worker.submit(job, kind if entry is None else f"{kind} on {entry.title}", session=session,
                                  owner=owner, keep_on_disconnect=keep_on_disconnect)

    def submit_outpaint(self, params, sides: dict[str, int], *, save: bool, session: str | None = None,
                        owner: str | None = None, checkpoint: str | None = None,
                        restore_checkpoint: bool = True, keep_on_disconnect: bool = False,
                        mk2: dict[str, float] | None = None, writing=None) -> Job:
        """Queue an outpaint of `params.init_images[0]` by `sides` (left/right/top/bottom pixels): Poor man's, or
        Outpainting mk2 with `mk2`'s fill settings (falloff_exponent, color_variation; the mask blur is
        `params.mask_blur` for both).

        Checked now: the extension, the script's settings, and the img2img limits at the extended size. `owner` and
        `checkpoint` and `writing` as for `submit_generation` (the API's outpainting scripts, webui.api_scripts).
        """
        from dataclasses import replace

        from pipelines.outpaint import check_outpaint_inputs

        image = params.init_images[0]
        if mk2 is not None:
            from pipelines.outpaint_mk2 import check_mk2_settings

            check_mk2_settings(params.mask_blur, **mk2)
        # mk2's blur has its own bound (checked above); Poor man's is checked here
        width, height = check_outpaint_inputs(image, sides["left"], sides["right"], sides["top"], sides["bottom"], 8,
                                              params.mask_blur if mk2 is None else 0)
        self.check_params("img2img", replace(params, width=width, height=height))
        entry = self.requested_checkpoint(checkpoint)
        job = refiner_errors_in_web_terms(
            outpaint_job(self, params, sides, save=save, checkpoint=entry, restore_checkpoint=restore_checkpoint,
                         mk2=mk2, writing=writing or self.options.infotext_writing()), self.catalog)
        return self.worker.submit(job, "outpaint" if entry is None else f"outpaint on {entry.title}", session=session,
                                  owner=owner, keep_on_disconnect=keep_on_disconnect)

    def submit_script(self, kind: str, params, script, config, *, save: bool, grid_save: bool,
                      session: str | None = None, owner: str | None = None, checkpoint: str | None = None,
                      restore_checkpoint: bool = True, keep_on_disconnect: bool = False, writing=None,
                      override_settings: dict | None = None) -> Job:
        """Queue a selectable script (`pipelines.scripts`) with its checked `config` on validated `params`;
        `override_settings`: the request's, of which the script context reads `font` (the grid legends' font).

        Checked now, before anything is queued: the script's own plan (an X/Y/Z plot: every cell, Prompt S/R,
        samplers, checkpoints, styles, the size caps), and each planned generation as `check_params` checks a call.
        `save`: the script's images; `grid_save`: its grids. The rest as for `submit_generation`."""
        from webui.api_selectable_scripts import script_context
        from webui.generation_jobs import checkpoint_switcher, script_job, vae_switcher

        if kind not in script.kinds:
            raise ValueError(f"script {script.title!r} runs for {', '.join(sorted(script.kinds))}, not {kind}.")
        context = script_context(self, override_settings)
        planned = script.plan(params, config, kind=kind, switch_checkpoint=checkpoint_switcher(self, kind, params),
                              switch_vae=vae_switcher(self, kind, params), **context)
        for index, call in enumerate(planned):
            try:
                self.check_params(kind, call)
            except (ValueError, TypeError) as error:  # which line of 500, which cell of 1,000
                if script.describe_call is None:
                    raise
                refused = ValueError if isinstance(error, ValueError) else TypeError
                raise refused(f"{script.title}, {script.describe_call(config, index)}: {error}") from None
        entry = self.requested_checkpoint(checkpoint)
        job = refiner_errors_in_web_terms(
            script_job(self, kind, params, script, config, save=save, grid_save=grid_save, context=context,
                       checkpoint=entry, restore_checkpoint=restore_checkpoint,
                       writing=writing or self.options.infotext_writing()), self.catalog)
        description = f"{kind} {script.title}" + ("" if entry is None else f" on {entry.title}")
        return self.worker.submit(job, description, session=session, owner=owner,
                                  keep_on_disconnect=keep_on_disconnect)

    def submit_upscale(self, image, scale: float, upscaler: str, *, session: str | None = None,
                       after=None) -> Job:
        """Queue an Extras upscale (validated now: upscaler name, scale and output size); `after(image)` runs on the
        result in the same job (the crop and face restoration, `webui.api_extras.extras_postprocess`)."""
        from pipelines.upscale import UPSCALERS, UpscaleLimits, check_upscale, upscale_image

        UPSCALERS.get(upscaler)  # unknown name -> error listing the valid ones
        check_upscale(image.width, image.height, scale, UpscaleLimits(), upscaler)

        def run(control, on_step):
            upscaled = upscale_image(image, scale, upscaler=upscaler)
            return upscaled if after is None else after(upscaled)

        return self.worker.submit(run, "extras", session=session)

    def submit_postprocess(self, image, after, *, session: str | None = None) -> Job:
        """Queue Extras work without an upscale (face restoration alone) on the same queue as the upscales."""
        return self.worker.submit(lambda control, on_step: after(image), "extras", session=session)

    def submit_upscale_batch(self, images: list, scales: list[float], upscaler: str, *, session: str | None = None,
                             keep_on_disconnect: bool = False, after=None, held=None) -> Job:
        """Queue the Extras upscale of `images` (each by its scale) as one job, every one checked before it is queued;
        the job returns the upscaled images in order, fewer when interrupted between two. One job, as A1111's
        "Batch Process" is one task: a page that reloads follows it by one task id, and progress counts images.
        `keep_on_disconnect`: the Extras tab's run goes on when its page goes away, for a reloaded page to follow.
        `held`: a context manager factory the whole job runs in (the Caption models `after` uses, loaded once)."""
        from pipelines.control import StepProgress
        from pipelines.upscale import UPSCALERS, UpscaleLimits, check_upscale, upscale_image

        if not images or len(images) != len(scales):
            raise ValueError(f"give one scale per image, got {len(images)} image(s) and {len(scales)} scale(s).")
        UPSCALERS.get(upscaler)  # unknown name -> error listing the valid ones
        for image, scale in zip(images, scales):
            check_upscale(image.width, image.height, scale, UpscaleLimits(), upscaler)
        work = list(zip(images, scales))

        def run(control, on_step) -> list:
            upscaled = []
            with contextlib.nullcontext() if held is None else held():
                for image, scale in work:
                    if control.interrupted:
                        break
                    result = upscale_image(image, scale, upscaler=upscaler)
                    upscaled.append(result if after is None else after(result))
                    on_step(StepProgress(step=len(upscaled), total_steps=len(work), batch_index=0, batch_count=1,
                                         latents=None, control=control))
            return upscaled

        return self.worker.submit(run, "extras", session=session, keep_on_disconnect=keep_on_disconnect)

    def current_preview(self, owner=ANY_OWNER):
        """A cheap RGB preview of the running job's latest latents (of `owner`'s job only, when given), or None."""
        latents = self.worker.progress(owner).preview_latents
        if latents is None or latents.shape[1] != 4:  # the cheap preview factors are for 4-channel latents
            return None
        from pipelines.preview import latent_preview

        model = self.holder.loaded_model()
        if model is None:
            return None
        return latent_preview(latents[:1], sdxl=model.family.uses_pooled_text)[0]
