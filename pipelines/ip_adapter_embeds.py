"""Image prompts turned into IP-Adapter embeddings, and handed to the UNet per conditioning row.

As diffusers' `encode_image`: a plain adapter reads the encoder's projected `image_embeds` and its negative is
zeros; a plus adapter reads the penultimate hidden states and its negative is those of an all-zero image. Prompt
rows get the image, negative-prompt rows the negative, so classifier-free guidance pushes towards the picture.
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


def ip_adapter_unet_extra(embeds: list[ImageEmbeds], inner: Callable[..., dict] | None = None,
                          scales_at: Callable[[int], None] | None = None) -> Callable[..., dict]:
    """The `unet_extra(model_input, t, step_cond, step, row_owners)` callable giving each row its image embeddings
    (`added_cond_kwargs["image_embeds"]`), after `inner`'s keywords (ControlNet's residuals) when there is one;
    `scales_at(step)`, when given, sets the adapters' scales for the step (guidance windows) before the UNet runs."""
    import torch

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
        return kwargs

    return unet_extra
