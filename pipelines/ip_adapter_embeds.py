"""Image prompts turned into IP-Adapter embeddings, and handed to the UNet per conditioning row.

As diffusers' `encode_image`: a plain adapter reads the encoder's projected `image_embeds` and its negative is
zeros; a plus adapter reads the penultimate hidden states and its negative is those of an all-zero image. Prompt
rows get the image, negative-prompt rows the negative, so classifier-free guidance pushes towards the picture.

Precomputed embeddings (`ip_adapter_image_embeds`) use diffusers' layout: per adapter one tensor, negative half
first, `[2, images, projection_dim]` for a plain adapter and `[2, images, tokens, hidden_size]` for a plus one, as
`IPAdapterMixin.encode_ip_adapter_image` returns them. mixkit always runs negative rows (A1111 computes the
unconditional pass at any CFG scale), so the negative half is always needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class ImageEmbeds:
    """One adapter's embeddings for the call: [1, images, ...] for prompt rows and for negative rows."""

    positive: Any
    negative: Any


def encode_ip_images(adapter, images: tuple) -> ImageEmbeds:
    """`images` (one adapter's) through its encoder, as diffusers' `encode_image` does."""
    import torch

    encoder = adapter.encoder
    pixels = adapter.processor(images=list(images), return_tensors="pt").pixel_values
    pixels = pixels.to(device=encoder.device, dtype=encoder.dtype)
    with torch.inference_mode():
        if adapter.uses_hidden_states:
            positive = encoder(pixels, output_hidden_states=True).hidden_states[-2]
            negative = encoder(torch.zeros_like(pixels), output_hidden_states=True).hidden_states[-2]
        else:
            positive = encoder(pixels).image_embeds
            negative = torch.zeros_like(positive)
    return ImageEmbeds(positive[None].float(), negative[None].float())


def check_ip_adapter_image_embeds(value: Any, adapters: int) -> tuple:
    """Per adapter its `[2, images, ...]` embeddings tensor or None, from diffusers' list form; shapes a user can fix
    are named in the errors. What depends on the adapter (plain or plus, widths) is `check_embeds_fit`'s."""
    import torch

    if value is None:
        return (None,) * adapters
    if isinstance(value, torch.Tensor):
        raise TypeError(f"ip_adapter_image_embeds must be a list with one tensor per IP-Adapter (diffusers' form), "
                        f"got one tensor of shape {tuple(value.shape)}; wrap it in a list: [embeds].")
    if not isinstance(value, (list, tuple)) or len(value) != adapters:
        count = f"{len(value)} entries" if isinstance(value, (list, tuple)) else type(value).__name__
        raise ValueError(f"ip_adapter_image_embeds has {count} for {adapters} IP-Adapters; give one entry per "
                         "adapter: a tensor, or None for an adapter given ip_adapter_image.")
    from pipelines.ip_adapter_inputs import MAX_IMAGES_PER_ADAPTER

    for index, embeds in enumerate(value):
        if embeds is None:
            continue
        if not isinstance(embeds, torch.Tensor):
            raise TypeError(f"ip_adapter_image_embeds[{index}] must be a torch tensor or None, got "
                            f"{type(embeds).__name__}.")
        shape = tuple(embeds.shape)
        if embeds.ndim not in (3, 4) or shape[0] != 2 or not 1 <= shape[1] <= MAX_IMAGES_PER_ADAPTER \
                or 0 in shape:
            raise ValueError(f"ip_adapter_image_embeds[{index}] has shape {shape}; it must be [2, images, "
                             "projection_dim] (plain adapters) or [2, images, tokens, hidden_size] (plus adapters) "
                             f"with the negative half first and 1 to {MAX_IMAGES_PER_ADAPTER} images, as "
                             "encode_ip_adapter_image returns.")
        if not embeds.is_floating_point() or not bool(torch.isfinite(embeds).all()):
            raise ValueError(f"ip_adapter_image_embeds[{index}] must hold finite floating-point numbers; it has "
                             f"dtype {embeds.dtype}{' with NaN or inf values' if embeds.is_floating_point() else ''}.")
    return tuple(value)


def check_embeds_fit(adapter, embeds, index: int) -> None:
    """Refuse embeddings the adapter's image projection cannot read: pooled `[2, images, projection_dim]` for a
    plain adapter, hidden states `[2, images, tokens, hidden_size]` for a plus one, with the width it was made for."""
    from pipelines.ip_adapter_layers import encoder_dim_needed

    width = encoder_dim_needed(adapter.state, adapter.kind)
    ndim = 3 if adapter.kind == "plain" else 4
    if embeds.ndim != ndim or embeds.shape[-1] != width:
        wanted = f"[2, images, {width}]" if ndim == 3 else f"[2, images, tokens, {width}]"
        raise ValueError(f"ip_adapter_image_embeds[{index}] has shape {tuple(embeds.shape)}, but IP-Adapter "
                         f"{adapter.name!r} ({adapter.kind}) reads {wanted}; compute the embeddings with this "
                         "adapter's image encoder (encode_ip_adapter_image).")


def embeds_of_tensor(embeds) -> ImageEmbeds:
    """A checked `[2, images, ...]` tensor as the call's ImageEmbeds (its first half is the negative)."""
    negative, positive = embeds.detach().float().chunk(2)
    return ImageEmbeds(positive, negative)


def ip_adapter_unet_extra(embeds: list[ImageEmbeds], inner: Callable[..., dict] | None = None,
                          scales_at: Callable[[int], None] | None = None,
                          masks: list | None = None) -> Callable[..., dict]:
    """The `unet_extra(model_input, t, step_cond, step, row_owners)` callable giving each row its image embeddings
    (`added_cond_kwargs["image_embeds"]`), after `inner`'s keywords (ControlNet's residuals) when there is one;
    `scales_at(step)`, when given, sets the adapters' scales for the step (guidance windows) before the UNet runs;
    `masks` (per adapter a `[1, images, H, W]` tensor or None, `ip_adapter_masks.mask_tensors`) go to diffusers'
    IP-Adapter processors as `cross_attention_kwargs["ip_adapter_masks"]`, resized to the latent."""
    import torch

    from pipelines.ip_adapter_masks import masks_at

    resized: dict = {}

    def unet_extra(model_input, t, step_cond, step: int, row_owners: list[int]) -> dict:
        if scales_at is not None:
            scales_at(step)
        kwargs = dict(inner(model_input, t, step_cond, step, row_owners)) if inner is not None else {}
        # Prompt rows, not "rows that are not negative": a step skipping the negative prompt (NGMS) lets a prompt
        # row stand in for it, and that row keeps the image (as ControlNet's residuals do).
        prompt_rows = {row for parts in step_cond.cond_rows for row, _ in parts}
        positive = torch.tensor([row in prompt_rows for row in range(len(row_owners))], device=model_input.device)
        image_embeds = []
        for embed in embeds:
            shape = (len(row_owners), *embed.positive.shape[1:])
            pos = embed.positive.to(model_input.device).expand(shape)
            neg = embed.negative.to(model_input.device).expand(shape)
            chosen = torch.where(positive.view(-1, *[1] * (len(shape) - 1)), pos, neg)
            image_embeds.append(chosen.to(dtype=model_input.dtype))
        added = dict(kwargs.pop("added_cond_kwargs", None) or {})
        added["image_embeds"] = image_embeds
        kwargs["added_cond_kwargs"] = added
        if masks is not None and any(mask is not None for mask in masks):
            attention = dict(kwargs.get("cross_attention_kwargs") or {})
            attention["ip_adapter_masks"] = masks_at(masks, *model_input.shape[-2:], model_input.device, resized)
            kwargs["cross_attention_kwargs"] = attention
        return kwargs

    return unet_extra
