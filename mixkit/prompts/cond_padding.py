"""A1111's "Pad prompt/negative prompt" settings: prompt and negative prompt rows made one length for one UNet call.

By default a prompt and a negative prompt of different lengths (75 tokens vs 150) are run as separate UNet calls,
each at its own length (`StepConditioning.token_groups`). A1111's CFG denoiser (`sd_samplers_cfg_denoiser`) can make
them one length first, which runs one batched call and changes the image (the shorter rows attend to more tokens):

- `pad_cond_uncond` ("Pad conds"): the shorter side gets whole chunks of the empty prompt's encoding appended, as
  many as the difference in 77-token chunks;
- `pad_cond_uncond_v0` ("Pad conds v0", A1111's DDIM behaviour before 1.6, checked first): only the negative
  prompt changes: a shorter one repeats its last vector up to the prompt's length, a longer one is cut to it.

Both act only when the lengths differ, and A1111 records the key only then.
"""

from __future__ import annotations

import torch

from mixkit.prompts.conditioning import StepConditioning

PADDING_MODES = ("empty", "v0")


def padded_to_one_length(cond: StepConditioning, empty: torch.Tensor, mode: str) -> StepConditioning | None:
    """`cond` with its prompt rows and negative rows at one length by `mode` ("empty": A1111's pad_cond_uncond with
    `empty`, the empty prompt's [77, D] encoding; "v0": pad_cond_uncond_v0), or None when they already are one."""
    if mode not in PADDING_MODES:
        raise ValueError(f"cond padding mode must be one of {PADDING_MODES}, got {mode!r}.")
    if cond.row_tokens is None or len(set(cond.row_tokens)) == 1:
        return None
    negative = set(cond.uncond_rows)
    prompt_rows = [row for row in range(len(cond.row_tokens)) if row not in negative]
    negative_rows = sorted(negative)
    prompt_length = cond.row_tokens[prompt_rows[0]]
    negative_length = cond.row_tokens[negative_rows[0]]
    prompts = cond.embeds[prompt_rows, :prompt_length]
    negatives = cond.embeds[negative_rows, :negative_length]
    if mode == "v0":
        if negative_length < prompt_length:
            negatives = torch.cat([negatives, negatives[:, -1:].expand(-1, prompt_length - negative_length, -1)], 1)
        else:
            negatives = negatives[:, :prompt_length]
    else:
        chunks = (prompt_length - negative_length) // empty.shape[0]  # floor division, as A1111's
        if chunks < 0:
            prompts = _with_chunks(prompts, empty, -chunks)
        elif chunks > 0:
            negatives = _with_chunks(negatives, empty, chunks)
        if prompts.shape[1] != negatives.shape[1]:  # lengths not whole chunks apart: A1111 leaves them as they are
            return None
    embeds = cond.embeds.new_zeros(cond.embeds.shape[0], prompts.shape[1], cond.embeds.shape[2])
    embeds[prompt_rows] = prompts
    embeds[negative_rows] = negatives
    return StepConditioning(embeds=embeds, pooled=cond.pooled, uncond_rows=cond.uncond_rows,
                            cond_rows=cond.cond_rows, row_image=cond.row_image, row_tokens=None)


def _with_chunks(rows: torch.Tensor, empty: torch.Tensor, chunks: int) -> torch.Tensor:
    return torch.cat([rows, empty.to(rows).unsqueeze(0).expand(rows.shape[0], -1, -1).repeat(1, chunks, 1)], dim=1)
