"""The denoising loop shared by every diffusion pipeline.

One scheduler instance per image: schedulers keep per-trajectory state (multistep history,
Brownian trees of SDE samplers), and a per-image instance stepping with that image's own
generator makes each image independent of its batch. The UNet still runs on the whole batch.
Conditioning is asked for at every step, so prompt editing / alternation switch inside the loop,
and AND parts are combined in classifier-free guidance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class SamplingRequest:
    unet: Any
    schedulers: list  # one per image, already `set_timesteps`
    latents: Any  # [B, C, h, w] float32 on the UNet device, already scaled by init_noise_sigma / noised for img2img
    plan: Any  # ConditioningPlan: .at_step(model call index) -> StepConditioning
    combine_cfg: Callable  # (noise_pred [R,...], step_cond, cfg_scale) -> [B,...]
    cfg_scale: float
    generators: list  # one per image
    steps: int  # steps this run makes (WebUI counting), for conditioning schedules and progress
    timesteps: Any = None  # default: the first scheduler's timesteps; img2img passes the tail it runs
    time_ids: Any = None  # SDXL: [B, 6] micro-conditioning
    extra_channels: Any = None  # inpainting UNets: [B, k, h, w] appended to each row's input channels
    post_step: Callable[[Any, int], Any] | None = None  # (latents, evaluation index) -> latents
    # pipelines.inpaint_blend.MaskBlend: inpainting's original latents, put back as A1111 does (or ControlNet
    # inpaint_only's InpaintOnlyBlend, which keeps its picture's latents the extension's way)
    mask_blend: Any = None
    # ControlNet & co: (model_input, t, step_cond, step, row_owners) -> extra UNet keyword arguments
    unet_extra: Callable[..., dict] | None = None
    on_step: Callable[[int, Any], bool] | None = None  # (steps completed, latents) -> False to stop
    uncond_skip: Any = None  # pipelines.uncond_skip.UncondSkip: steps that leave out the negative prompt (NGMS)
    negative_time_ids: Any = None  # [B, k] for the negative prompt's rows when they differ (SDXL refiner's score)
    refiner: Any = None  # pipelines.refiner.RefinerSwitch: another UNet takes over from one model call on
    # pipelines.instruct_pix2pix.ImageGuidance: an ip2p model's Image CFG scale (one more pass: negative, no image)
    image_guidance: Any = None


def run_sampler(request: SamplingRequest):
    """Denoise `request.latents`; returns the final latents (when stopped early: the latest denoised estimate)."""
    import torch

    from pipelines.samplers import extra_step_kwargs
    from pipelines.samplers.churn import churn_rows
    from pipelines.samplers.dpm_adaptive import model_call_timesteps
    from pipelines.inpaint_blend import current_step_index
    from pipelines.stopped_latents import LastEvaluation
    from pipelines.uncond_skip import timestep_sigmas, without_uncond

    unet, schedulers, latents = request.unet, request.schedulers, request.latents
    timesteps = schedulers[0].timesteps if request.timesteps is None else request.timesteps
    sampler_steps = max(1, request.steps)
    # DPM adaptive: one walk over the whole batch (its error is the batch's, as A1111's), its calls decided as it
    # goes; its call count is unknown, so the rules counting evaluations use A1111's total for it, the step count.
    walk = schedulers[0] if getattr(schedulers[0], "walks_whole_batch", False) else None
    evaluations = sampler_steps if walk is not None else len(timesteps)
    steppers = schedulers if walk is None else [walk] * len(schedulers)
    # DDIM CFG++: guides at A1111's scaled-down CFG and renoises with the unconditional prediction, which it is handed
    guidance_multiplier = getattr(schedulers[0], "cfg_scale_multiplier", 1.0)
    hand_uncond = getattr(schedulers[0], "needs_uncond_prediction", False)
    done = 0
    # Read once: a diffusers model's .device/.dtype walk its parameters and offload hooks on every
    # access, which cost ~9% of a step on mixkit-tiny-sd when done four times per step.
    device, dtype = unet.device, unet.dtype
    skip = request.uncond_skip if request.uncond_skip is not None and request.uncond_skip.active else None
    if request.image_guidance is not None:  # A1111 applies NGMS only `not is_edit_model`; the pipeline checked the rest
        skip = None
    sigmas = timestep_sigmas(schedulers[0].alphas_cumprod, timesteps) if skip is not None and walk is None else None
    with torch.inference_mode():
        for index, t in enumerate(model_call_timesteps(schedulers[0], timesteps)):
            if request.refiner is not None and request.refiner.due(index, schedulers[0]):  # A1111's Refiner
                request = request.refiner.applied_to(request)
                unet = request.unet
                device, dtype = unet.device, unet.dtype
            # Second-order samplers evaluate the model ~2x per step. Progress and ControlNet windows count
            # steps; prompt schedules count model calls, as A1111's denoiser does (the plan was built over
            # steps x 2 for them, so `[a:b:10]` with Heun switches at call 10, i.e. step 5, as there).
            step = index * sampler_steps // evaluations if walk is None else _walked_steps(walk, sampler_steps, True)
            cond = request.plan.at_step(index)
            cfg_scale = request.cfg_scale * guidance_multiplier
            sigma = None if skip is None else float(walk.call_sigma) if walk is not None else sigmas[index]
            if skip is not None and skip.skips(index, evaluations, sigma):
                cond, cfg_scale = without_uncond(cond), 1.0
            rows = _row_owners(cond, latents.shape[0])
            samples = [latents[i:i + 1] for i in range(len(schedulers))]
            # k-diffusion's churn (Euler, Heun, DPM2 with s_churn): noise added and the model run at sigma_hat
            samples, model_t = churn_rows(schedulers, samples, t, request.generators)
            scaled_rows = [s.scale_model_input(samples[i], t) for i, s in enumerate(steppers)]
            blend = request.mask_blend
            if blend is not None:
                scaled = torch.cat([blend.model_input(row, i, sample=samples[i], scheduler=steppers[i],
                                                      timestep=model_t) for i, row in enumerate(scaled_rows)])
            else:
                scaled = torch.cat(scaled_rows)
            if request.extra_channels is not None:
                scaled = torch.cat([scaled, request.extra_channels.to(scaled)], dim=1)
            model_input = scaled[rows].to(device=device, dtype=dtype)
            time_ids = _row_time_ids(request, cond, rows)
            groups = cond.token_groups()
            if len(groups) == 1:
                noise_pred = _predict(request, unet, model_input, model_t, cond, step, rows, time_ids, device, dtype)
            else:
                # Prompt and negative prompt of different lengths: one UNet call each, as A1111 runs them.
                noise_pred = None
                for group, tokens in groups:
                    part = _predict(request, unet, model_input[group], model_t, cond.subset(group, tokens), step,
                                    [rows[r] for r in group], None if time_ids is None else time_ids[group],
                                    device, dtype)
                    if noise_pred is None:
                        noise_pred = part.new_empty((len(rows), *part.shape[1:]))
                    noise_pred[group] = part
            if not torch.isfinite(noise_pred).all():
                # A1111's NaN check (NansException): fp16 overflow or broken weights would give a black image.
                raise ValueError(
                    f"The UNet produced NaN/inf at step {step + 1}: an fp16 overflow (try a float32 or bf16 UNet: "
                    "--preset exact) or a broken checkpoint/LoRA (non-finite weights); the images of this batch "
                    "are lost.")
            guided = request.combine_cfg(noise_pred, cond, cfg_scale)
            if request.image_guidance is not None:
                guided = _image_guided(request, unet, model_input, model_t, cond, step, rows, time_ids, noise_pred,
                                       guided, device, dtype)
            if blend is not None:
                guided = torch.cat([blend.guided_output(guided[i:i + 1], samples[i], scaled_rows[i], s, i,
                                                        timestep=model_t) for i, s in enumerate(steppers)])
            step_indices = [current_step_index(s) for s in schedulers]
            if walk is not None:
                outputs = [walk.step(guided, t, torch.cat(samples), generator=request.generators)]
            else:
                outputs = [s.step(guided[i:i + 1], t, samples[i], **extra_step_kwargs(s, request.generators[i]),
                                  **_uncond_kwargs(hand_uncond, noise_pred, cond, i))
                           for i, s in enumerate(schedulers)]
            latents = torch.cat([output.prev_sample for output in outputs])
            last = LastEvaluation(outputs, samples, scaled_rows, guided, schedulers, step_indices, model_t,
                                  whole_batch=walk is not None)
            if request.post_step is not None:
                latents = request.post_step(latents, index)
            if walk is None:
                completed, last_call = (index + 1) * sampler_steps // evaluations, index == evaluations - 1
            else:
                completed, last_call = _walked_steps(walk, sampler_steps), walk.progress >= 1
            if completed > done or last_call:
                done = completed
                if request.on_step is not None and request.on_step(done, latents) is False:
                    if not last_call:  # A1111 hands back the latest denoised estimate, not the noisy sample
                        latents = last.denoised()
                        if request.post_step is not None:
                            latents = request.post_step(latents, index)
                    break
    if request.mask_blend is not None:  # A1111 puts the original back into the finished (or interrupted) latents
        latents = request.mask_blend.final(latents)
    return latents


def _image_guided(request: SamplingRequest, unet, model_input, t, cond, step: int, rows: list[int], time_ids,
                  noise_pred, guided, device, dtype):
    """`guided` with an ip2p model's image guidance added: the UNet run once more on each image's negative row with
    the image channels zeroed (pipelines.instruct_pix2pix says why this is A1111's three-way formula)."""
    import torch

    negatives = list(cond.uncond_rows)
    tokens = cond.embeds.shape[1] if cond.row_tokens is None else max(cond.row_tokens[row] for row in negatives)
    free = _predict(request, unet, request.image_guidance.image_free_input(model_input[negatives]), t,
                    cond.subset(negatives, tokens), step, [rows[row] for row in negatives],
                    None if time_ids is None else time_ids[negatives], device, dtype)
    if not torch.isfinite(free).all():
        raise ValueError(f"The UNet produced NaN/inf at step {step + 1} (the image-free pass of Image CFG scale): an "
                         "fp16 overflow (try a float32 or bf16 UNet: --preset exact) or a broken checkpoint/LoRA.")
    return request.image_guidance.guided(guided, noise_pred[negatives], free)


def _uncond_kwargs(hand_uncond: bool, noise_pred, cond, image: int) -> dict:
    """`noise_uncond` for a sampler that renoises with the unconditional prediction: image `image`'s uncond row (a
    step leaving out the negative prompt has its first prompt part there, as A1111's `last_noise_uncond`)."""
    if not hand_uncond:
        return {}
    row = cond.uncond_rows[image]
    return {"noise_uncond": noise_pred[row:row + 1]}


def _walked_steps(walk, steps: int, running: bool = False) -> int:
    """DPM adaptive's steps done, by the log-sigma range its accepted steps have covered: it reaches `steps` exactly
    when the walk ends, whatever its call count (A1111 shows k-diffusion's attempt counter, which can stop short of
    or pass the step count). `running`: the step the call being made belongs to (at most steps - 1), for the
    ControlNet windows."""
    done = min(steps, int(walk.progress * steps))
    return min(done, steps - 1) if running else done


def _row_time_ids(request: SamplingRequest, cond, rows: list[int]):
    """SDXL micro-conditioning per conditioning row: its image's, the negative prompt's own where it has one."""
    if request.time_ids is None:
        return None
    time_ids = request.time_ids[rows]
    if request.negative_time_ids is not None:
        # Negative rows are the images' uncond rows that are no prompt part (a step skipping the negative prompt
        # puts a prompt row in their place, `without_uncond`).
        prompt_rows = {row for parts in cond.cond_rows for row, _ in parts}
        for row in set(cond.uncond_rows) - prompt_rows:
            if row >= 0:
                time_ids[row] = request.negative_time_ids[rows[row]]
    return time_ids


def _predict(request: SamplingRequest, unet, model_input, t, cond, step: int, rows: list[int], time_ids,
             device, dtype):
    """The UNet's float32 prediction for `model_input`'s rows under `cond` (ControlNet, IP-Adapter & SDXL extras
    included)."""
    kwargs = {}
    if time_ids is not None:
        kwargs["added_cond_kwargs"] = {
            "text_embeds": cond.pooled.to(device=device, dtype=dtype),
            "time_ids": time_ids.to(device=device, dtype=dtype),
        }
    if request.unet_extra is not None:
        extra = dict(request.unet_extra(model_input, t, cond, step, rows))
        added = extra.pop("added_cond_kwargs", None)
        if added:  # IP-Adapter's image_embeds join SDXL's text_embeds / time_ids
            kwargs["added_cond_kwargs"] = {**kwargs.get("added_cond_kwargs", {}), **added}
        kwargs.update(extra)
    return unet(model_input, t, encoder_hidden_states=cond.embeds.to(device=device, dtype=dtype), **kwargs).sample.float()


def _row_owners(cond, batch: int) -> list[int]:
    """Which image each conditioning row belongs to (its uncond row and every AND part)."""
    owners = [0] * cond.embeds.shape[0]
    for image in range(batch):
        owners[cond.uncond_rows[image]] = image
        for row, _weight in cond.cond_rows[image]:
            owners[row] = image
    return owners
