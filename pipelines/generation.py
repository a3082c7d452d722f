"""State one loaded model keeps across generations: prompt encoders, LoRA and embedding libraries.

`ModelSession.prepared(...)` is the single place where per-call model changes happen (LoRAs
from parameters and prompt tags); it is a context manager so that the model is restored even
when sampling fails or is interrupted.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mixkit import __version__
from mixkit.models.diffusion import DiffusionModel, ModelFamily
from pipelines.rng_source import infotext_rng


# The suffixes A1111 appends to a result's file stem for the copies its Settings > Saving keep
BEFORE_FACE_RESTORATION = "-before-face-restoration"
BEFORE_COLOR_CORRECTION = "-before-color-correction"


@dataclass
class GenerationResult:
    images: list = field(default_factory=list)
    seeds: list = field(default_factory=list)
    infotexts: list = field(default_factory=list)
    interrupted: bool = False
    # A1111's Processed.is_using_inpainting_conditioning: the model is an inpainting (9-channel) UNet, which took the
    # mask and masked-image channels, in txt2img too (a full mask there)
    inpainting_conditioning: bool = False
    # A1111's Processed.subseed: the call's variation seed made concrete (-1 drawn at random); image k used
    # subseed + k (only when subseed_strength > 0 does the infotext record it). None: no call has set it.
    subseed: int | None = None
    # With `save_images_before_face_restoration`: image index -> the image as decoded, before Restore faces
    before_face_restoration: dict = field(default_factory=dict)
    # With img2img's `save_images_before_color_correction`: image index -> the image as finished (pasted back)
    # without colour correction, saved as "-before-color-correction" (A1111's suffix)
    before_color_correction: dict = field(default_factory=dict)

    def add(self, image, seed: int, infotext: str) -> None:
        self.images.append(image)
        self.seeds.append(seed)
        self.infotexts.append(infotext)

    def add_from(self, result: GenerationResult, index: int, infotext: str | None = None) -> None:
        """Append image `index` of `result` (its infotext unless `infotext` is given) with the copies kept from before
        face restoration and colour correction, which `save` writes beside it as A1111 does for a script's images."""
        position = len(self.images)
        self.add(result.images[index], result.seeds[index], result.infotexts[index] if infotext is None else infotext)
        for kept, own in ((result.before_face_restoration, self.before_face_restoration),
                          (result.before_color_correction, self.before_color_correction)):
            if index in kept:
                own[position] = kept[index]

    def kept_copies(self, index: int) -> list[tuple[Any, str]]:
        """Image `index`'s copies kept from before face restoration / colour correction, each with the suffix A1111's
        `save_image(..., suffix=...)` appends to the result's file stem ("-before-face-restoration", ...)."""
        return [(kept[index], suffix) for kept, suffix in ((self.before_face_restoration, BEFORE_FACE_RESTORATION),
                                                            (self.before_color_correction, BEFORE_COLOR_CORRECTION))
                if index in kept]

    def save(self, folder: str | os.PathLike, writing=None) -> list:
        """Write each image as PNG with its infotext; returns the paths (names: counter-seed.png). An image kept from
        before face restoration is written next to its result as counter-seed-before-face-restoration.png (A1111's
        suffix), one from before colour correction as counter-seed-before-color-correction.png, not counted in the
        paths returned.

        `writing` (`pipelines.png.InfotextWriting`; None: in the PNG only): in the PNG chunk, a `.txt` beside it."""
        from pipelines.png import PNG_ONLY, save_png, save_png_numbered

        writing = writing or PNG_ONLY
        paths = []
        for index, (image, seed, infotext) in enumerate(zip(self.images, self.seeds, self.infotexts)):
            path = save_png_numbered(image, folder, seed, infotext, writing=writing)
            paths.append(path)
            for kept, suffix in self.kept_copies(index):
                save_png(kept, path.with_name(f"{path.stem}{suffix}.png"), infotext, replace=False, writing=writing)
        return paths

    def save_as(self, path: str | os.PathLike, writing=None) -> list:
        """Write the images to a PNG file name of the caller's choosing (with infotext, as `save`): one image as
        `path` itself, several as `<stem>-1.png`, `<stem>-2.png`, ... beside it. Existing files of those names are
        replaced (each atomically), as a tool told to write `cat.png` is expected to do. A copy kept from before face
        restoration or colour correction goes beside its image as `<its stem>-before-color-correction.png` (A1111's
        suffix on the result's own name: `cat.png` -> `cat-before-color-correction.png`), never in its place; the
        copies are not among the paths returned."""
        from pipelines.png import PNG_ONLY, save_png

        path = Path(path)
        check_png_file_name(path)
        writing = writing or PNG_ONLY
        if len(self.images) == 1:
            targets = [path]
        else:
            targets = [path.with_name(f"{path.stem}-{n}{path.suffix}") for n in range(1, len(self.images) + 1)]
        paths = []
        for index, (image, target, infotext) in enumerate(zip(self.images, targets, self.infotexts)):
            paths.append(save_png(image, target, infotext, writing=writing))
            for kept, suffix in self.kept_copies(index):
                save_png(kept, target.with_name(f"{target.stem}{suffix}.png"), infotext, writing=writing)
        return paths


def check_png_file_name(path: str | os.PathLike) -> None:
    """An output file name must end in .png: the infotext travels in a PNG text chunk."""
    if Path(path).suffix.lower() != ".png":
        raise ValueError(f"output file {str(path)!r} must end in .png (the generation parameters are stored in a "
                         "PNG text chunk); name a .png file or a folder")


@dataclass(frozen=True)
class ResolvedSampler:
    """A sampler name and schedule type checked against the registry, bound to one model's schedule."""

    name: str
    schedule_type: str
    base_config: dict
    sdxl: bool = False  # "Align Your Steps" has SDXL's own sigmas
    eta: float | None = None  # what `sampler_eta` resolved (None: the sampler has no eta)
    # A1111's Settings > Sampler parameters (schedule bounds, rho, churn ...); None: all at their defaults
    parameters: Any = None

    @property
    def calls_per_step(self) -> int:
        """A1111's step multiplier: 2 for second-order samplers, whose prompt schedules count model calls."""
        from pipelines.samplers import SAMPLERS

        return 2 if SAMPLERS.get(self.name).second_order else 1

    @property
    def takes_seed_delta(self) -> bool:
        """Whether A1111's ENSD changes this sampler: those drawing later noise from its RNG (ancestral, DDIM, LCM).

        A1111's SDE samplers take theirs from Brownian trees seeded by the image seeds, which ENSD leaves alone.
        """
        from pipelines.samplers import SAMPLERS

        spec = SAMPLERS.get(self.name)
        churns = self.parameters is not None and self.parameters.churns  # churn noise comes from the same RNG
        return spec.noise_source == "generator" or spec.eta_infotext_key == "Eta DDIM" or churns

    @property
    def cond_padding(self) -> str | None:
        """A1111's "Pad prompt/negative prompt" mode for the prompt schedules ("empty", "v0" or None)."""
        return None if self.parameters is None else self.parameters.cond_padding

    def make_schedulers(self, generators: list, steps: int, device) -> list:
        """One fresh scheduler per image; SDE samplers with Brownian trees get that image's seed."""
        from pipelines.samplers import make_scheduler, seed_brownian_noise, start_at_first_step

        schedulers = []
        for generator in generators:
            scheduler = make_scheduler(self.name, self.base_config, self.schedule_type, sdxl=self.sdxl,
                                       parameters=self.parameters)
            if self.eta is not None and hasattr(scheduler, "eta"):
                scheduler.eta = self.eta
            if self.parameters is not None and hasattr(scheduler, "s_noise"):  # before set_timesteps (DPM2 a)
                scheduler.s_noise = float(self.parameters.s_noise)
            if hasattr(scheduler, "churn_parameters"):
                scheduler.churn_parameters = self.parameters
            scheduler.set_timesteps(steps, device=device)
            start_at_first_step(scheduler)
            seed_brownian_noise(scheduler, [generator.initial_seed()])
            schedulers.append(scheduler)
        return schedulers


# A1111's infotext key of Settings > Compatibility "Use old prompt editing timelines" (use_old_scheduling)
OLD_TIMELINES_KEY = "Old prompt editing timelines"


class PreparedCall:
    """Conditioning and infotext details for one call, with its LoRAs applied."""

    def __init__(self, encoder, prompts: list[str], negatives: list[str], loras) -> None:
        self._encoder = encoder
        self._prompts = prompts
        self._negatives = negatives
        self._loras = loras
        self._plans: dict[tuple[int, int | None, str | None, bool], Any] = {}

    def left_out_loras(self) -> dict[str, tuple[int, list[str]]]:
        """LoRAs a partial application (`prepared(partial_loras=True)`) could not apply whole: name -> (modules
        applied, keys left out)."""
        return self._loras.left_out() if self._loras is not None else {}

    def plan(self, steps: int, first_pass_steps: int | None = None, cond_padding: str | None = None,
             use_old_scheduling: bool = False):
        """The prompt schedule for `steps` (built once: every text is encoded before sampling starts).

        `first_pass_steps`: this is a hires-fix pass after a first pass of that many steps (A1111's offsets).
        `cond_padding`: A1111's "Pad prompt/negative prompt" ("empty", "v0"; `SamplerParameters.cond_padding`).
        `use_old_scheduling`: A1111's "Use old prompt editing timelines" (`Txt2ImgParams.use_old_scheduling`)."""
        from mixkit.prompts import build_conditioning_plan

        key = (steps, first_pass_steps, cond_padding, use_old_scheduling)
        if key not in self._plans:
            self._plans[key] = build_conditioning_plan(self._encoder, self._prompts, self._negatives, steps,
                                                       first_pass_steps=first_pass_steps, cond_padding=cond_padding,
                                                       use_old_scheduling=use_old_scheduling)
        return self._plans[key]

    @staticmethod
    def combine_cfg(noise_pred, step_cond, cfg_scale: float):
        from mixkit.prompts import combine_cfg

        return combine_cfg(noise_pred, step_cond, cfg_scale)

    def infotext_extras(self, options=None) -> dict[str, Any]:
        """The keys this call's prompts and LoRAs add; `options` (`InfotextOptions`, None: A1111's defaults) may leave
        out `Lora hashes`, `TI hashes` or a LoRA-bundled word's entry in it."""
        from mixkit.prompts import ti_hashes_infotext
        from pipelines.infotext_options import InfotextOptions

        options = options or InfotextOptions()
        extras: dict[str, Any] = {}
        if self._loras is not None and options.lora_add_hashes_to_infotext:
            extras["Lora hashes"] = self._loras.infotext_hashes() or None
        if options.textual_inversion_add_hashes_to_infotext:
            used: dict[str, str] = {}
            for plan in self._plans.values():  # one entry per word, though several schedules encoded it
                used.update(plan.embeddings_used)
            extras["TI hashes"] = ti_hashes_infotext(used, bundled=options.lora_bundled_ti_to_infotext) or None
        extras["Emphasis"] = self.emphasis_infotext()
        # A1111 records these when its CFG denoiser padded a prompt and negative prompt of different lengths
        for mode, key in (("empty", "Pad conds"), ("v0", "Pad conds v0")):
            if any(plan.padded for (_, _, padding, _), plan in self._plans.items() if padding == mode):
                extras[key] = True
        if any(plan.old_timelines for plan in self._plans.values()):  # A1111: only when the option changed a schedule
            extras[OLD_TIMELINES_KEY] = True
        return extras

    def emphasis_infotext(self) -> str | None:
        """A1111's `Emphasis` key: the mode, when it is not "Original" and a scheduled text has "(" or "[" (its
        `sd_hijack_clip` forward writes it under exactly that condition)."""
        from mixkit.prompts.emphasis import DEFAULT_EMPHASIS

        name = self._encoder.emphasis_name
        if name == DEFAULT_EMPHASIS or not any(plan.uses_brackets for plan in self._plans.values()):
            return None
        return name


class ModelSession:
    def __init__(self, model: DiffusionModel, *, embeddings_dir=None, lora_dir=None, hypernetwork_dir=None) -> None:
        self.model = model
        self.embeddings_dir = embeddings_dir
        self.lora_dir = lora_dir
        self.hypernetwork_dir = hypernetwork_dir
        self.hypernetworks = None  # the HypernetworkLibrary of hypernetwork_dir (loaded files cached across calls)
        if hypernetwork_dir is not None:
            from mixkit.hypernetworks import HypernetworkLibrary

            self.hypernetworks = HypernetworkLibrary(hypernetwork_dir)  # a missing folder is refused here
        # (clip_skip, emphasis, comma_backtrack, sdxl_clip_l_skip) -> PromptEncoder
        self._encoders: dict[tuple, Any] = {}
        self._embeddings = None  # the EmbeddingLibrary of embeddings_dir, rescanned before every call
        from pipelines.refiner import RefinerSlot

        self.refiner_slot = RefinerSlot()  # A1111's Refiner: the checkpoint finishing this model's images

    def resolve_sampler(self, name: str, schedule_type: str, eta: float | None = None,
                        parameters=None) -> ResolvedSampler:
        """The sampler for this model; `parameters`: A1111's sampler settings (`SamplerParameters`, None: defaults)."""
        from pipelines.samplers import resolve_sampler, sampler_eta

        spec, schedule = resolve_sampler(name, schedule_type)
        sdxl = self.model.family.uses_pooled_text  # Align Your Steps' SDXL sigmas serve its refiner too
        if parameters is not None and parameters == type(parameters)():
            parameters = None  # every setting at its default: the very schedulers that ran before they existed
        return ResolvedSampler(spec.name, schedule, dict(self.model.scheduler_config), sdxl, sampler_eta(name, eta),
                               parameters)

    def encoder(self, clip_skip: int, bundled: dict | None = None, *, emphasis: str = "Original",
                comma_backtrack: int = 20,  # A1111's defaults (mixkit.prompts DEFAULT_EMPHASIS, COMMA_BACKTRACK)
                sdxl_clip_l_skip: bool = False):
        """One cached PromptEncoder per clip skip, emphasis mode, comma backtrack and "Clip skip SDXL", so unchanged
        prompts are never re-encoded.

        `bundled`: embeddings carried by the LoRAs applied for one call (a folder embedding of the same name wins
        over one, as in A1111: `mixkit.lora.bundled_embeddings.library_with_bundled`); that encoder is built for the
        call and never cached.
        """
        key = (clip_skip, emphasis, comma_backtrack, sdxl_clip_l_skip)
        if bundled:
            return self._new_encoder(key, bundled)
        if key not in self._encoders:
            self._encoders[key] = self._new_encoder(key, {})
        return self._encoders[key]

    def refresh_embeddings(self) -> None:
        """Rescan the embeddings folder; drop the cached encoders if a file was added, removed or changed.

        A1111 calls `load_textual_inversion_embeddings()` before every generation (it compares the folder's
        mtime), so new and replaced embeddings apply at once; a scan costs one stat per file, and files that have
        not changed are not read again (`EmbeddingLibrary.refreshed`).
        """
        if self.embeddings_dir is None:
            return
        from mixkit.prompts import EmbeddingLibrary

        if self._embeddings is None:
            self._embeddings = EmbeddingLibrary(self.embeddings_dir)
            return
        fresh = self._embeddings.refreshed()
        if fresh.signature() != self._embeddings.signature():
            self._encoders.clear()  # their embedding-name tables and cached encodings describe the old files
        self._embeddings = fresh

    def _new_encoder(self, key: tuple, bundled: dict):
        from mixkit.lora.bundled_embeddings import library_with_bundled
        from mixkit.prompts import PromptEncoder

        clip_skip, emphasis, comma_backtrack, sdxl_clip_l_skip = key
        if self._embeddings is None:
            self.refresh_embeddings()  # an encoder asked for outside `prepared`
        embeddings = self._embeddings
        family = self.model.family
        if bundled:  # into a copy: the session's library stays the folder's
            embeddings = library_with_bundled(embeddings, bundled, self.model.text_encoders, family.uses_pooled_text)
        return PromptEncoder(self.model.tokenizers, self.model.text_encoders,
                             is_sdxl=family.uses_pooled_text, sdxl_refiner=family is ModelFamily.SDXL_REFINER,
                             clip_skip=clip_skip, embeddings=embeddings, emphasis=emphasis,
                             comma_backtrack=comma_backtrack, sdxl_clip_l_skip=sdxl_clip_l_skip)

    @contextlib.contextmanager
    def prepared(self, prompts: list[str], negatives: list[str], loras: list, clip_skip: int, *,
                 emphasis: str = "Original", comma_backtrack: int = 20, sdxl_clip_l_skip: bool = False,
                 partial_loras: bool = False, hypernetwork_modules: tuple = ()):
        """`partial_loras=True`: each LoRA acts on the layers it fits and the rest of it is left out
        (`apply_loras(partial=True)`; a refiner running the base model's LoRAs, `PreparedCall.left_out_loras()`).

        `hypernetwork_modules`: other models of the call whose attentions read the prompt (a ControlNet's), which
        the prompt's hypernetworks reach too, as A1111's attention hijack reaches every CrossAttention."""
        from mixkit.prompts import extract_extra_networks
        from mixkit.prompts.extra_networks import unknown_extra_network_tags, warn_skipped_extra_networks

        self.refresh_embeddings()

        # Every prompt loses its tags, but only the first prompt's tags are applied, as A1111's
        # `extra_networks.parse_prompts` does: the copies of one prompt in a batch would otherwise add up the
        # strengths (batch 3 at 0.8 = 2.4), and one model state serves the whole batch.
        clean_prompts, requests, hypernet_tags = [], [], []
        for index, prompt in enumerate(prompts):
            text, tags = extract_extra_networks(prompt)
            clean_prompts.append(text)
            if index == 0:
                requests = list(tags)
                hypernet_tags = self._hypernetwork_tags(prompt)
                # A1111 removes every tag from every prompt and skips kinds it does not know, the first prompt's
                # once per call (`extra_networks.activate`)
                skipped = unknown_extra_network_tags(prompt)
                if self.hypernetworks is not None:
                    skipped = [tag for tag in skipped if not tag.startswith("<hypernet:")]
                warn_skipped_extra_networks(skipped, stacklevel=3)
        # Negative prompts keep their tags as text, neither applied nor removed: A1111 1.10 parses extra networks
        # out of the prompts only (`StableDiffusionProcessing.parse_extra_network_prompts`), so a pasted infotext
        # with `<lora:...>` in its "Negative prompt:" gives A1111's image only if the tag is encoded as it is there.
        warn_negative_tags(negatives)
        lora_requests = self._lora_requests(loras, requests)
        # Hypernetwork files are read before any LoRA is merged, so a bad file or name changes nothing
        hypernetworks = self._hypernetworks_for(hypernet_tags)
        if lora_requests or hypernetworks:
            self._check_backend_takes_networks(lora_requests, hypernetworks)
        applied = applied_hypernetworks = None
        if lora_requests:
            from mixkit.lora import apply_loras

            applied = apply_loras(self.model.unet, self.model.text_encoders, lora_requests, mode="merge",
                                  partial=partial_loras)
            self._encoders.clear()  # text-encoder weights changed: cached encodings are stale
        try:
            if hypernetworks:
                from mixkit.hypernetworks import apply_hypernetworks

                # The UNet's key/value projections, for this call only (A1111 applies them in every attention)
                applied_hypernetworks = [apply_hypernetworks(self.model.unet, hypernetworks)]
                with warnings.catch_warnings():  # a width the model lacks was said for the UNet already
                    warnings.simplefilter("ignore", UserWarning)
                    for module in hypernetwork_modules:
                        applied_hypernetworks.append(apply_hypernetworks(module, hypernetworks))
            bundled = applied.bundled_embeddings() if applied is not None else None
            encoder = self.encoder(clip_skip, bundled, emphasis=emphasis, comma_backtrack=comma_backtrack,
                                   sdxl_clip_l_skip=sdxl_clip_l_skip)
            yield PreparedCall(encoder, clean_prompts, list(negatives), applied)
        finally:
            for applied_to_one in reversed(applied_hypernetworks or []):
                applied_to_one.remove()
            if applied is not None:
                applied.remove()
                self._encoders.clear()

    def _hypernetwork_tags(self, prompt: str) -> list:
        """The prompt's `<hypernet:...>` tags when a hypernetwork folder is set (without one they are skipped with a
        warning, as before; a malformed one is then no error either)."""
        if self.hypernetworks is None:
            return []
        from mixkit.hypernetworks import parse_hypernetwork_tags

        return parse_hypernetwork_tags(prompt)

    def _hypernetworks_for(self, tags: list) -> list:
        if not tags:
            return []
        from mixkit.hypernetworks import resolve_hypernetwork_requests

        return resolve_hypernetwork_requests(tags, self.hypernetworks)

    def _check_backend_takes_networks(self, lora_requests: list, hypernetworks: list) -> None:
        backend = self.model.extras.get("execution_backend")
        if backend in (None, "torch", "torch.compile"):
            return
        if lora_requests:
            names = ", ".join(str(getattr(r, "name", r)) for r in lora_requests)
            raise ValueError(f"LoRAs per generation ({names}) cannot be applied on the {backend} backend, whose "
                             "graphs are compiled with fixed weights; merge the LoRAs before optimize(..., "
                             f"backend={backend!r}) or use backend='torch'.")
        names = ", ".join(application.hypernetwork.name for application in hypernetworks)
        raise ValueError(f"hypernetworks ({names}) cannot be applied on the {backend} backend, whose graphs are "
                         "compiled without them; use backend='torch' for prompts with <hypernet:...> tags.")

    def _lora_requests(self, loras: list, tags: list) -> list:
        if not loras and not tags:
            return []
        from mixkit.lora import LoraRequest, resolve_lora_requests

        explicit = [r if isinstance(r, LoraRequest) else LoraRequest.parse(str(r)) for r in loras]
        return resolve_lora_requests(explicit, tags, self.lora_dir)

    def infotext(self, params, sampler: ResolvedSampler, *, prompt: str, negative_prompt: str, seed: int,
                 extra: dict[str, Any]) -> str:
        from mixkit.runtime.fp8_storage import FP8_WEIGHT_EXTRA
        from pipelines.infotext import build_infotext
        from pipelines.inpaint_mask import is_inpainting_unet
        from pipelines.sampler_parameters import beta_schedule_infotext

        if params.loras:  # LoRAs passed outside the prompt (`loras=`, `--lora`) go into it as tags, so a paste redoes them
            from mixkit.lora import LoraRequest

            requests = [r if isinstance(r, LoraRequest) else LoraRequest.parse(str(r)) for r in params.loras]
            prompt = " ".join([prompt, *(request.prompt_tag for request in requests)]).strip()
        model = self.model
        values: dict[str, Any] = {
            "Steps": params.steps,
            "Sampler": sampler.name,
            "Schedule type": sampler.schedule_type,
            "CFG scale": params.cfg_scale,
            "Image CFG scale": None,  # A1111's place for an instruct-pix2pix img2img's, given in `extra`
            "Seed": seed,
            # A1111 writes the restorer setting's name for any image of a restore_faces call
            "Face restoration": params.face_restoration_model if params.restore_faces else None,
            "Size": f"{params.width}x{params.height}",
            **params.infotext_options.model_values({  # A1111's add_model_name_to_info ... add_vae_hash_to_info
                "Model hash": model.model_hash,
                "Model": model.name,
                # A1111's fp8_storage while the weights are FP8 (an X/Y/Z plot's FP8 mode cells), and its cache
                # option then: LoRAs merge into the FP8 weights, as A1111's without cache_fp16_weight
                "FP8 weight": model.extras.get(FP8_WEIGHT_EXTRA),
                "Cache FP16 weight for LoRA": False if model.extras.get(FP8_WEIGHT_EXTRA) else None,
                "VAE hash": model.extras.get("vae_hash"),
                "VAE": model.extras.get("vae_name"),
            }),
            # A1111's place for the Extra seed keys; their values come per image in `extra` (seed_extras_infotext)
            "Variation seed": None, "Variation seed strength": None, "Seed resize from": None,
            # img2img's and the hires fix's, given in `extra`: A1111's create_infotext places it here, not with the
            # other extra_generation_params after RNG
            "Denoising strength": None,
            # A1111 writes the inpainting_mask_weight setting for every inpainting-model image (txt2img too, whose
            # first pass does not read it), as a Python float: "1.0", "0.5"
            "Conditional mask weight": repr(float(params.inpainting_mask_weight)) if is_inpainting_unet(model.unet)
            else None,
            "Clip skip": params.clip_skip if params.clip_skip > 1 else None,
            **beta_schedule_infotext(sampler.parameters, sampler.schedule_type),
            **_eta_infotext(sampler),
            **_sampler_parameters_infotext(sampler),
            "ENSD": params.ensd if _uses_ensd(sampler, params.ensd) else None,
            "Tiling": "True" if params.tiling else None,  # A1111's place for it, after ENSD
            # A1111's `apply_refiner` records the option at every model call it is on, refiner or not
            "Refiner switch by sampling steps": True if params.refiner_switch_by_sample_steps else None,
            # The noise comes from CPU generators or, for NV, Philox ones (`pipelines.rng_source`); A1111 reads a
            # missing key as "GPU" noise, so without this its "paste" would redraw every image differently.
            "RNG": infotext_rng(params.rng_source),
        }
        from pipelines.approx.labels import model_labels

        values.update(model_labels(model).infotext_values())  # optimisation / approximation labels of this model
        from pipelines.params import uncond_skip_of

        values.update(uncond_skip_of(params).infotext_values())  # NGMS / Skip Early CFG: approximate, per call
        if params.hypertile is not None:  # A1111's Hypertile keys (a hires fix adds its second pass's: hires_infotext)
            values.update({key: value for key, value in params.hypertile.infotext_values().items()
                           if value is not None})
        if params.freeu is not None:
            from pipelines.approx.freeu import INFOTEXT_KEY as FREEU_KEY

            values[FREEU_KEY] = params.freeu.infotext_value()
        values.update(extra)
        # A1111's last two keys, each behind its option (add_version_to_infotext on, add_user_name_to_info off)
        values["Version"] = f"mixkit {__version__}" if params.infotext_options.add_version_to_infotext else None
        values["User"] = params.user if params.infotext_options.add_user_name_to_info else None
        return build_infotext(prompt, negative_prompt, values)


def warn_negative_tags(negatives: list[str]) -> None:
    """Say once per call that `<lora:...>` tags in a negative prompt are not applied (they stay in it as text, as in
    A1111), since a user who put one there most likely expected the LoRA to act."""
    from mixkit.prompts.extra_networks import find_extra_network_tags

    tags = list(dict.fromkeys(tag for negative in negatives for tag in find_extra_network_tags(negative)))
    if tags:
        warnings.warn(f"negative prompt: {', '.join(tags)} not applied; as in A1111, extra-network tags act only in "
                      "the prompt, and in the negative prompt they are encoded as plain text. Move the tag to the "
                      "prompt to apply it, or delete it.", UserWarning, stacklevel=4)


def _eta_infotext(sampler: ResolvedSampler) -> dict[str, float]:
    """A1111 writes "Eta" / "Eta DDIM" only when the sampler's eta is not its default."""
    from pipelines.samplers import SAMPLERS

    spec = SAMPLERS.get(sampler.name)
    if sampler.eta is None or sampler.eta == spec.eta_default:
        return {}
    return {spec.eta_infotext_key: sampler.eta}


def _sampler_parameters_infotext(sampler: ResolvedSampler) -> dict[str, Any]:
    """A1111's "Schedule min sigma", "Sigma churn" ... keys, for the settings that changed this image."""
    if sampler.parameters is None:
        return {}
    from pipelines.samplers import SAMPLERS, SCHEDULE_TYPES

    return sampler.parameters.infotext_values(SAMPLERS.get(sampler.name), SCHEDULE_TYPES.get(sampler.schedule_type))


def _uses_ensd(sampler: ResolvedSampler, ensd: int) -> bool:
    """ENSD is recorded where it changes the image: the ancestral samplers and DDIM, at an eta above 0.

    A1111 records it for the ancestral ones only, though its DDIM draws eta noise from the same RNG; recording it
    for DDIM too keeps that image reproducible from its infotext (A1111's paste reads the key back as its setting).
    """
    return bool(ensd) and sampler.takes_seed_delta and sampler.eta != 0
