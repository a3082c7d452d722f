"""IP-Adapter weights checked against a UNet, and put on it for one call with diffusers' own layers.

diffusers' `UNet2DConditionLoadersMixin` builds the layers (`IPAdapterAttnProcessor2_0` with the adapters'
`to_k_ip` / `to_v_ip`, `MultiIPAdapterImageProjection`); what it lacks is checked here: a family mismatch (an
SD 1.5 adapter on SDXL) is named before anything changes instead of failing as a tensor-size error halfway through
replacing processors, and `attached_ip_adapters` puts back the UNet's own processors (mixkit's attention kernels,
which diffusers' loader would replace in self-attention too), projection and config however the call ends.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

# Cross-attention width -> the model family whose text encoder has it, for errors a user can act on
FAMILY_OF_CROSS_DIM = {768: "SD 1.x", 1024: "SD 2.x", 2048: "SDXL"}


@dataclass
class LoadedIPAdapter:
    """One adapter's weights (CPU, as read) with its image encoder, ready to attach to a matching UNet."""

    name: str
    state: dict  # {"image_proj": {...}, "ip_adapter": {...}}
    encoder: Any  # CLIPVisionModelWithProjection; None when the call passes precomputed embeddings
    processor: Any  # CLIPImageProcessor; None with the encoder
    kind: str  # "plain" (pooled image embeds) or "plus" (penultimate hidden states through a resampler)

    @property
    def uses_hidden_states(self) -> bool:
        """diffusers' `output_hidden_states`: every projection but the plain `ImageProjection` reads hidden states."""
        return self.kind != "plain"


def adapter_kind(name: str, image_proj: dict) -> str:
    """"plain" (h94's ip-adapter_sd15 / ip-adapter_sdxl) or "plus" (ip-adapter-plus*); other variants are refused."""
    if "proj.weight" in image_proj and "norm.weight" in image_proj:
        return "plain"
    if "latents" in image_proj and "proj_in.weight" in image_proj:
        return "plus"
    raise ValueError(f"IP-Adapter {name!r} is a variant mixkit does not run (FaceID and full-face adapters need face "
                     "embeddings or layers mixkit has not wired); use ip-adapter_* or ip-adapter-plus_* weights.")


def cross_dim_of(state: dict, kind: str) -> int:
    """The text-embedding width the adapter's image tokens are made for (768 for SD 1.5, 2048 for SDXL)."""
    image_proj = state["image_proj"]
    if kind == "plain":
        return int(image_proj["norm.weight"].shape[0])
    return int(image_proj["proj_out.weight"].shape[0])


def encoder_dim_needed(state: dict, kind: str) -> int:
    """The image-encoder output width the projection reads: projection_dim (plain) or hidden_size (plus)."""
    image_proj = state["image_proj"]
    return int(image_proj["proj.weight" if kind == "plain" else "proj_in.weight"].shape[1])


def check_adapter_fits(adapter: LoadedIPAdapter, unet) -> None:
    """Refuse, naming both families, an adapter made for another UNet (cross-attention width or layer count) or
    an image encoder whose output width its projection cannot read. Nothing has been changed when this raises."""
    unet_dim = unet.config.cross_attention_dim
    unet_dim = unet_dim[0] if isinstance(unet_dim, (list, tuple)) else unet_dim
    adapter_dim = cross_dim_of(adapter.state, adapter.kind)
    # the UNet's own cross-attention layers (an attached plus adapter's resampler has processors too)
    layers = sum(1 for name in unet.attn_processors
                 if not name.endswith("attn1.processor") and not name.startswith("encoder_hid_proj"))
    k_keys = [key for key in adapter.state["ip_adapter"] if key.endswith(".to_k_ip.weight")]
    k_dims = {int(adapter.state["ip_adapter"][key].shape[1]) for key in k_keys}
    if adapter_dim != unet_dim or k_dims != {unet_dim} or len(k_keys) != layers:
        raise ValueError(
            f"IP-Adapter {adapter.name!r} was made for a UNet with cross-attention width {adapter_dim} "
            f"({_family(adapter_dim)}) and {len(k_keys)} cross-attention layers; this model has {unet_dim} "
            f"({_family(unet_dim)}) and {layers}. Use an adapter made for this model's family (h94/IP-Adapter: "
            "models/ for SD 1.5, sdxl_models/ for SDXL).")
    if adapter.encoder is None:  # precomputed embeddings: their width is checked by `check_embeds_fit`
        return
    needed = encoder_dim_needed(adapter.state, adapter.kind)
    config = adapter.encoder.config
    given = config.projection_dim if adapter.kind == "plain" else config.hidden_size
    if given != needed:
        what = "projection_dim" if adapter.kind == "plain" else "hidden_size"
        raise ValueError(f"IP-Adapter {adapter.name!r} reads {needed}-wide image embeddings but its image encoder "
                         f"gives {given} ({what}); pass the encoder it was trained with (image_encoder_folder=, "
                         "--ip-adapter-image-encoder): h94's models/image_encoder (ViT-H) for most adapters, "
                         "sdxl_models/image_encoder (ViT-bigG) for ip-adapter_sdxl.")


@contextlib.contextmanager
def attached_ip_adapters(unet, adapters: list[LoadedIPAdapter], scales: list[float]):
    """The UNet with `adapters` at `scales` for the `with` block (diffusers' layers, mixkit's self-attention kept);
    afterwards its processors, `encoder_hid_proj` and config are the ones it had, also when the block raised."""
    from diffusers.models.embeddings import MultiIPAdapterImageProjection

    for adapter in adapters:
        check_adapter_fits(adapter, unet)
    own_processors = dict(unet.attn_processors)
    own_projection, own_type = unet.encoder_hid_proj, unet.config.encoder_hid_dim_type
    device, dtype = unet.device, unet.dtype
    try:
        states = [adapter.state for adapter in adapters]
        processors = unet._convert_ip_adapter_attn_to_diffusers(states, low_cpu_mem_usage=False)
        for name, processor in processors.items():
            if name.endswith("attn1.processor"):  # self-attention: the UNet's own kernel, not a fresh default
                processors[name] = own_processors[name]
            else:
                processor.to(device=device, dtype=dtype)
                processor.scale = list(scales)
        projections = [unet._convert_ip_adapter_image_proj_to_diffusers(state["image_proj"], low_cpu_mem_usage=False)
                       for state in states]
        unet.set_attn_processor(processors)
        unet.encoder_hid_proj = MultiIPAdapterImageProjection(projections).to(device=device, dtype=dtype)
        unet.config.encoder_hid_dim_type = "ip_image_proj"  # what diffusers' loader sets (and unload resets)
        yield unet
    finally:
        unet.encoder_hid_proj = own_projection
        unet.config.encoder_hid_dim_type = own_type
        unet.set_attn_processor(own_processors)


def windowed_scales(unet, scales, windows, total_steps: int):
    """`scales_at(step)`: sets each attached adapter's scale on the UNet's IP-Adapter processors for `step`, its
    scale inside its (start, end) window and 0 outside, with sd-webui-controlnet's schedule (active while
    start <= step / total <= end, step counted from 0, as ControlNet units). diffusers' processors read their
    `scale` list at every forward (its `IPAdapterScaleCutoffCallback` changes it between steps the same way), and
    `attached_ip_adapters` replaces the processors after the call, so nothing outlives it."""
    processors = [p for p in unet.attn_processors.values() if hasattr(p, "to_k_ip")]
    last: list = []

    def scales_at(step: int) -> None:
        fraction = step / max(1, total_steps)
        now = [scale if start <= fraction <= end else 0.0 for scale, (start, end) in zip(scales, windows)]
        if now != last:
            for processor in processors:
                processor.scale = list(now)
            last[:] = now

    return scales_at


def _family(dim: int) -> str:
    return FAMILY_OF_CROSS_DIM.get(dim, "a non-standard model")
