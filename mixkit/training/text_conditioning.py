"""Caption -> UNet conditioning for SD 1.x/2.x (one CLIP encoder) and SDXL (two, plus size/crop ids).

Training must condition exactly as inference does, otherwise a LoRA learns a shifted space:
SD 1.x/2.x use the final layer output; SDXL concatenates both encoders' penultimate hidden states
and adds the second encoder's pooled projection and the (original size, crop, target size) ids.
"""

from __future__ import annotations

import torch


def tokenize(tokenizer, captions: list[str]) -> torch.Tensor:
    return tokenizer(captions, padding="max_length", max_length=tokenizer.model_max_length,
                     truncation=True, return_tensors="pt").input_ids


def encode_sd(text_encoders: list, tokenizers: list, captions: list[str], device) -> dict:
    """`encoder_hidden_states` for SD 1.x/2.x."""
    ids = tokenize(tokenizers[0], captions).to(device)
    return {"encoder_hidden_states": text_encoders[0](ids)[0]}


def encode_sdxl(text_encoders: list, tokenizers: list, captions: list[str], device,
                original_sizes: list[tuple[int, int]], crops: list[tuple[int, int]],
                target_size: tuple[int, int]) -> dict:
    """`encoder_hidden_states` plus `added_cond_kwargs` (pooled text embeds, time ids) for SDXL."""
    hidden, pooled = [], None
    for encoder, tokenizer in zip(text_encoders, tokenizers):
        output = encoder(tokenize(tokenizer, captions).to(device), output_hidden_states=True)
        hidden.append(output.hidden_states[-2])
        pooled = output[0]  # the projection model's first output is its pooled, projected embedding
    time_ids = torch.tensor([[*size, *crop, *target_size] for size, crop in zip(original_sizes, crops)],
                            dtype=hidden[0].dtype, device=device)
    return {"encoder_hidden_states": torch.cat(hidden, dim=-1),
            "added_cond_kwargs": {"text_embeds": pooled, "time_ids": time_ids}}
