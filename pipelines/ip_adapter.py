"""IP-Adapter (image prompts) for the SD 1.x / 2.x and SDXL pipelines, on diffusers' own IP-Adapter layers.

`IPAdapterMixin` adds `ip_adapter`, `ip_adapter_image` and `ip_adapter_scale` to a pipeline (as `ControlNetMixin`
adds `controlnets`): the adapters are read and checked against the model in `check_inputs`, put on the UNet for the
call only (`pipelines.ip_adapter_layers.attached_ip_adapters`) and taken off however it ends, so the pipeline is
always left as found. diffusers' `load_ip_adapter` / `set_ip_adapter_scale` / `unload_ip_adapter` are here too:
they set the adapters a call uses when it names none.

Beyond images and scales a call takes (`IPAdapterFields`): guidance windows (`ip_adapter_guidance`, written to the
infotext), precomputed embeddings (`ip_adapter_image_embeds`, made by `encode_ip_adapter_image` and cacheable) and
attention masks per reference image (`ip_adapter_mask`). Plain (`ip-adapter_*`) and Plus (`ip-adapter-plus_*`,
`ip-adapter-plus-face_*`: a resampler over the encoder's penultimate hidden states) adapters both run. Adapters all at
scale 0 are checked and written to the infotext but neither attached nor encoded (the picture is exactly the one
without them). With hires fix the adapters guide both passes (`pipelines.ip_adapter_hires`).

    pipe = IPAdapterTextToImage.from_pretrained("runwayml/stable-diffusion-v1-5")
    result = pipe(prompt="a cat", ip_adapter=IPAdapterSource("h94/IP-Adapter", subfolder="models",
                  weight_name="ip-adapter_sd15.safetensors"), ip_adapter_image=picture, ip_adapter_scale=0.6)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.img2img import ImageToImage, Img2ImgParams
from pipelines.ip_adapter_files import DEFAULT_IMAGE_ENCODER_FOLDER, IPAdapterSource
from pipelines.ip_adapter_inputs import IPAdapterCall
from pipelines.ip_adapter_params import IPAdapterFields
from pipelines.params import Txt2ImgParams
from pipelines.txt2img import TextToImage


@dataclass
class IPAdapterTxt2ImgParams(IPAdapterFields, Txt2ImgParams):
    """Text-to-image parameters plus the IP-Adapter fields (`IPAdapterFields`)."""


@dataclass
class IPAdapterImg2ImgParams(IPAdapterFields, Img2ImgParams):
    """img2img / inpainting parameters plus the IP-Adapter fields (`IPAdapterFields`)."""


@dataclass
class _IPAdapterState:
    base: Any  # the wrapped pipeline's own per-call state
    embeds: list = field(default_factory=list)  # ImageEmbeds per adapter
    masks: list | None = None  # per adapter a [1, images, H, W] mask tensor or None; None: no adapter is masked


class IPAdapterMixin:
    """Put before a pipeline class: `class P(IPAdapterMixin, TextToImage)`."""

    ip_mask_frame = "output"  # what masks are drawn over, for their aspect-ratio error (hires fix: "first pass")

    # Loaded adapters and settings live in the instance's __dict__, made at first use: an `__init__` here would hide
    # the keyword-only signature `from_pretrained` checks keywords against (`check_pipeline_keywords`).
    def _ip_state(self) -> dict:
        state = self.__dict__.get("_ip_adapter_state")
        if state is None:
            from pipelines.ip_adapter_store import IPAdapterStore

            state = self.__dict__["_ip_adapter_state"] = {
                "store": IPAdapterStore(),  # weights and encoders by file version; `use_ip_adapter_store` shares one
                "hub_files": {},  # IPAdapterSource of a hub id -> its weights file in the HF cache
                "default_sources": (),  # set by load_ip_adapter
                "default_scale": 1.0,  # set by set_ip_adapter_scale (diffusers' default)
            }
        return state

    # -- diffusers' loader API ---------------------------------------------------------------
    def load_ip_adapter(self, pretrained_model_name_or_path: Any, subfolder: Any = None, weight_name: Any = None,
                        image_encoder_folder: str | os.PathLike | None = DEFAULT_IMAGE_ENCODER_FOLDER, *,
                        local_files_only: bool = False) -> None:
        """Read the adapters (lists give several, as diffusers) and check them against this model now; calls that
        name no `ip_adapter` use them. Replaces the adapters loaded before; on an error those stay."""
        names = _as_list(pretrained_model_name_or_path)
        subfolders = _broadcast(subfolder, len(names), "subfolder")
        weight_names = _broadcast(weight_name, len(names), "weight_name")
        sources = tuple(IPAdapterSource(name, sub, weight, image_encoder_folder)
                        for name, sub, weight in zip(names, subfolders, weight_names))
        # raises before anything is replaced; image_encoder_folder=None (diffusers: embeddings will be passed)
        # loads no encoder
        encoders = tuple(source.image_encoder_folder is not None for source in sources)
        self._loaded_ip_adapters(sources, encoders, local_files_only=local_files_only)
        self._ip_state()["default_sources"] = sources

    def set_ip_adapter_scale(self, scale: Any) -> None:
        """The scale calls use when they pass no `ip_adapter_scale`: one number, or one per adapter (the count is
        checked against the call's adapters)."""
        from pipelines.ip_adapter_inputs import check_ip_adapter_scales

        values = list(scale) if isinstance(scale, (list, tuple)) else scale
        check_ip_adapter_scales(values, len(values) if isinstance(values, list) else 1)
        self._ip_state()["default_scale"] = values

    def use_ip_adapter_store(self, store) -> None:
        """Read adapters and image encoders through `store` (`pipelines.ip_adapter_store.IPAdapterStore`) instead of
        this pipeline's own: a server's store outlives the pipeline it builds for each job, so a unit used again is
        not read again."""
        self._ip_state()["store"] = store

    def unload_ip_adapter(self) -> None:
        """Forget the loaded adapters and their image encoders (memory freed) and the scale set; later calls run
        without adapters unless they name one. The UNet itself carries adapter layers only during a call."""
        self.__dict__.pop("_ip_adapter_state", None)

    # -- pipeline hooks ------------------------------------------------------------------------
    def check_inputs(self, params) -> None:
        super().check_inputs(params)
        state = self._ip_state()
        given = params.ip_adapter_image is not None or params.ip_adapter_image_embeds is not None
        if params.ip_adapter is None and state["default_sources"] and given:
            params.ip_adapter = list(state["default_sources"])
        if params.ip_adapter_scale is None:
            params.ip_adapter_scale = state["default_scale"]
        call = params.ip_adapter_call()
        if call is None:
            return
        backend = self.model.extras.get("execution_backend")
        if backend not in (None, "torch", "torch.compile"):
            raise ValueError(f"IP-Adapter cannot run on the {backend} backend, whose graphs are compiled without its "
                             "attention layers; use backend='torch' (--backend torch) for image prompts.")
        if getattr(params, "refiner", None) is not None:
            raise ValueError("IP-Adapter cannot run with a refiner yet: the refiner's UNet has no adapter layers, so "
                             "the image prompt would stop acting at the switch; drop the refiner (refiner=None, no "
                             "--refiner), or refine the result afterwards with img2img.")
        from pipelines.ip_adapter_embeds import check_embeds_fit
        from pipelines.ip_adapter_masks import check_mask_aspect

        check_mask_aspect(call.masks, params.width, params.height, self.ip_mask_frame)
        # read now: a missing file, a family mismatch or embeddings of the wrong width fail before any work
        adapters = self._loaded_ip_adapters(call.sources, call.encodes_images)
        for index, (adapter, embeds) in enumerate(zip(adapters, call.embeds)):
            if embeds is not None:
                check_embeds_fit(adapter, embeds, index)

    def _call_model_changes(self, params):
        import contextlib

        call = self._ip_call(params)
        if not _acts(call):
            return super()._call_model_changes(params)
        from pipelines.ip_adapter_layers import attached_ip_adapters

        outer = super()._call_model_changes(params)

        @contextlib.contextmanager
        def both():  # the outer changes are undone too when attaching fails
            with outer, attached_ip_adapters(self.model.unet,
                                             self._loaded_ip_adapters(call.sources, call.encodes_images),
                                             list(call.scales)):
                yield

        return both()

    def _prepare(self, params) -> _IPAdapterState:
        base = super()._prepare(params)
        call = self._ip_call(params)
        if not _acts(call):
            return _IPAdapterState(base)
        return _IPAdapterState(base, self._ip_embeds(call), self._ip_masks(call))

    def _ip_embeds(self, call: IPAdapterCall) -> list:
        """Each adapter's ImageEmbeds for the call: its images through its encoder, or its precomputed tensor (a hires
        fix's second pass reuses its first pass's instead, `pipelines.ip_adapter_hires`)."""
        from pipelines.ip_adapter_embeds import embeds_of_tensor, encode_ip_images

        adapters = self._loaded_ip_adapters(call.sources, call.encodes_images)
        return [encode_ip_images(adapter, images) if images is not None else embeds_of_tensor(tensor)
                for adapter, images, tensor in zip(adapters, call.images, call.embeds)]

    def _ip_masks(self, call: IPAdapterCall) -> list | None:
        """Per adapter a `[1, images, H, W]` mask tensor or None, in this pass's frame; None when no adapter is
        masked."""
        from pipelines.ip_adapter_masks import mask_tensors

        return mask_tensors(call.masks) if any(mask is not None for mask in call.masks) else None

    def _start_batch(self, params, state: _IPAdapterState, sampler, generators: list, first_image: int):
        start = super()._start_batch(params, state.base, sampler, generators, first_image)
        if state.embeds:
            from pipelines.ip_adapter_embeds import ip_adapter_unet_extra

            call = self._ip_call(params)
            scales_at = None
            if call.windowed:  # per-step scales only when asked: the default path keeps diffusers' fixed scales
                from pipelines.ip_adapter_layers import windowed_scales

                total = params.steps if start.steps is None else start.steps  # ControlNet units' denominator
                scales_at = windowed_scales(self.model.unet, call.scales, call.windows, total)
            start.unet_extra = ip_adapter_unet_extra(state.embeds, start.unet_extra, scales_at, state.masks)
        return start

    def _finish_image(self, params, state: _IPAdapterState, image, index: int):
        return super()._finish_image(params, state.base, image, index)

    def _hypernetwork_modules(self, state: _IPAdapterState) -> tuple:
        return super()._hypernetwork_modules(state.base)

    def _finish_call(self, state: _IPAdapterState, result) -> None:
        super()._finish_call(state.base, result)

    def _infotext_extras(self, params) -> dict[str, Any]:
        from pipelines.ip_adapter_infotext import ip_adapter_infotext

        call = self._ip_call(params)
        if call is None:
            return super()._infotext_extras(params)
        return {**super()._infotext_extras(params),
                **ip_adapter_infotext([source.name for source in call.sources], list(call.scales), list(call.windows))}

    # -- precomputed embeddings ------------------------------------------------------------------
    def encode_ip_adapter_image(self, ip_adapter_image: Any, ip_adapter: Any = None) -> list:
        """The `ip_adapter_image_embeds` a call with `ip_adapter_image` would compute, to cache and pass later.

        mixkit's counterpart of diffusers' `prepare_ip_adapter_image_embeds`, in its layout: a list with one CPU
        float32 tensor per adapter, negative half first, `[2, images, projection_dim]` (plain adapters) or
        `[2, images, tokens, hidden_size]` (plus adapters). `ip_adapter`: as in a call; None: the adapters
        `load_ip_adapter` set. A later call with `ip_adapter_image_embeds=` these (and the same adapters) gives the
        same picture without running the image encoder; save them with `safetensors.torch.save_file` or
        `torch.save`.
        """
        import torch

        from pipelines.ip_adapter_embeds import encode_ip_images
        from pipelines.ip_adapter_inputs import check_ip_adapter_inputs

        sources = ip_adapter if ip_adapter is not None else list(self._ip_state()["default_sources"])
        if not sources:
            raise ValueError("encode_ip_adapter_image needs IP-Adapters: pass ip_adapter= or call load_ip_adapter "
                             "first.")
        call = check_ip_adapter_inputs(sources, ip_adapter_image, 1.0)
        adapters = self._loaded_ip_adapters(call.sources)
        embeds = [encode_ip_images(adapter, images) for adapter, images in zip(adapters, call.images)]
        return [torch.cat([embed.negative, embed.positive]).cpu() for embed in embeds]

    # -- loading -------------------------------------------------------------------------------
    @staticmethod
    def _ip_call(params) -> IPAdapterCall | None:
        """The call's checked adapters (params were normalised by `check_inputs`, so this cannot raise)."""
        return params.ip_adapter_call()

    def _loaded_ip_adapters(self, sources, encoders: tuple[bool, ...] | None = None,
                            local_files_only: bool = False) -> list:
        """Each source read (through the store: once per file version) and checked against this model's UNet.
        `encoders[i]` False: adapter i is fed precomputed embeddings, so its image encoder is neither looked for nor
        loaded (diffusers' `image_encoder_folder=None`)."""
        from pipelines.ip_adapter_files import resolve_image_encoder, resolve_weight_file
        from pipelines.ip_adapter_layers import LoadedIPAdapter, check_adapter_fits

        cache = self._ip_state()
        store = cache["store"]
        adapters = []
        for source, needs_encoder in zip(sources, encoders or (True,) * len(sources)):
            # a hub file is looked up once per pipeline (huggingface_hub asks the hub at every lookup); local files
            # are found again each call, so a replaced file is read again
            file = cache["hub_files"].get(source) or resolve_weight_file(source, local_files_only)
            if not Path(os.fspath(source.source)).expanduser().exists():
                cache["hub_files"][source] = file
            state, kind = store.weights(file, source.name)  # before the encoder: a ControlNet file is named as such
            encoder = (None, None)
            if needs_encoder:
                encoder_folder = resolve_image_encoder(source, file, local_files_only)
                encoder = store.encoder(encoder_folder, self.model.device, self.model.unet.dtype)
            adapter = LoadedIPAdapter(source.name, state, *encoder, kind)
            try:
                check_adapter_fits(adapter, self.model.unet)  # a misfit stays in the store: it may fit another model
            except ValueError as error:
                if source.unit is None:
                    raise
                raise ValueError(f"{source.unit}: {error}") from None  # named as the unit's other errors are
            adapters.append(adapter)
        return adapters


class IPAdapterTextToImage(IPAdapterMixin, TextToImage):
    """Text-to-image with image prompts (IP-Adapter) for SD 1.x/2.x and SDXL."""

    params_class = IPAdapterTxt2ImgParams


class IPAdapterImageToImage(IPAdapterMixin, ImageToImage):
    """img2img / inpainting with image prompts (IP-Adapter)."""

    params_class = IPAdapterImg2ImgParams


def _acts(call: IPAdapterCall | None) -> bool:
    """Whether the call's adapters change anything: some adapter has a scale above 0. At scale 0 everywhere nothing is
    attached and nothing encoded, so the picture is exactly the one without adapters (attached, diffusers' processor
    would skip the adapters but run the text attention with its own kernel, a rounding difference); the checks and
    the infotext still cover them."""
    return call is not None and any(scale > 0 for scale in call.scales)


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _broadcast(value: Any, count: int, name: str) -> list:
    values = _as_list(value)
    if len(values) == 1:
        return values * count
    if len(values) != count:
        raise ValueError(f"load_ip_adapter got {len(values)} {name} values for {count} adapters; give one for all "
                         "or one per adapter.")
    return values
