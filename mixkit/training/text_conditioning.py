"""Caption -> UNet conditioning for SD 1.x/2.x (one CLIP encoder) and SDXL (two, plus size/crop ids).

Training must condition exactly as inference does, otherwise a LoRA learns a shifted space: the same layer
(`clip_skip`: SD 1.x/2.x take `hidden_states[-clip_skip]` through the final layer norm; SDXL ignores it, as A1111
and kohya do, and concatenates both encoders' penultimate `hidden_states[-2]` and adds the second encoder's pooled projection and the (original
size, crop, target size) ids), and for captions longer than 75 tokens (`max_token_length`, kohya's option) the
same 75-token chunks `mixkit.prompts` cuts a prompt into (A1111's rule, commas kept with their phrase), each
framed by BOS/EOS and encoded on its own, concatenated. A batch whose captions need different chunk counts pads
the shorter ones with empty chunks, as A1111 pads a shorter negative prompt.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mixkit.prompts.chunking import (
    CHUNK_TOKENS,
    TokenRun,
    frame_chunk,
    split_into_chunks,
)
from mixkit.prompts.encoder import text_encoder_layers

MAX_TOKEN_LENGTHS = (75, 150, 225)  # kohya's choices: one, two or three chunks


@dataclass(frozen=True)
class CaptionEncoding:
    """How captions are encoded in training: `clip_skip` 1 is the last layer (A1111's "Clip skip")."""

    clip_skip: int = 1
    max_token_length: int = 75

    def check_layers(self, text_encoders: list) -> None:
        """Raise ValueError when `clip_skip` reaches below the text encoders' first layer."""
        layers = text_encoder_layers(text_encoders)
        if self.clip_skip > layers:
            raise ValueError(f"clip_skip={self.clip_skip} is more than the text encoder's {layers} layers; use 1..{layers}")


def tokenize(tokenizer, captions: list[str], max_token_length: int = CHUNK_TOKENS) -> torch.Tensor:
    """(B, chunks, 77) token ids; one chunk (truncated at 75 tokens) unless `max_token_length` allows more."""
    if max_token_length <= CHUNK_TOKENS:
        return tokenizer(captions, padding="max_length", max_length=tokenizer.model_max_length,
                         truncation=True, return_tensors="pt").input_ids[:, None]
    comma = tokenizer.get_vocab().get(",</w>")
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    rows = []
    for ids in tokenizer(captions, add_special_tokens=False, truncation=False).input_ids:
        chunks = split_into_chunks([TokenRun(tuple(ids), 1.0)], comma_token=comma)
        rows.append([frame_chunk(chunk, bos=bos, eos=eos, pad=pad)[0]
                     for chunk in chunks[:max_token_length // CHUNK_TOKENS]])
    count = max(len(row) for row in rows)
    return torch.cat([_with_empty_chunks(tokenizer, torch.tensor([row], dtype=torch.long), count) for row in rows])


def _with_empty_chunks(tokenizer, ids: torch.Tensor, count: int) -> torch.Tensor:
    """`ids` (B, n, 77) followed by empty chunks (BOS, EOS, padding) up to `count` chunks."""
    empty = tokenizer([""], padding="max_length", max_length=tokenizer.model_max_length, return_tensors="pt").input_ids
    return torch.cat([ids, empty[:, None].repeat(ids.shape[0], count - ids.shape[1], 1)], dim=1)


def _hidden(encoder, ids: torch.Tensor, layer: int, final_norm: bool):
    """The encoder's output of every chunk: (B, chunks * 77, D) hidden states of `layer`, and the raw output."""
    batch, chunks, length = ids.shape
    output = encoder(ids.reshape(batch * chunks, length), output_hidden_states=layer != 0)
    if layer == 0:
        hidden = output[0]
    else:
        hidden = output.hidden_states[layer]
        if final_norm:
            # transformers 5 flattened CLIPTextModel; older versions nest the layers under .text_model
            hidden = getattr(encoder, "text_model", encoder).final_layer_norm(hidden)
    return hidden.reshape(batch, chunks * length, hidden.shape[-1]), output


def encode_sd(text_encoders: list, tokenizers: list, captions: list[str], device,
              encoding: CaptionEncoding = CaptionEncoding()) -> dict:
    """`encoder_hidden_states` for SD 1.x/2.x."""
    ids = tokenize(tokenizers[0], captions, encoding.max_token_length).to(device)
    layer = 0 if encoding.clip_skip == 1 else -encoding.clip_skip  # 0: the last layer, already normed
    hidden, _ = _hidden(text_encoders[0], ids, layer, final_norm=True)
    return {"encoder_hidden_states": hidden}


def encode_sdxl(text_encoders: list, tokenizers: list, captions: list[str], device,
                original_sizes: list[tuple[int, int]], crops: list[tuple[int, int]],
                target_size: tuple[int, int], encoding: CaptionEncoding = CaptionEncoding()) -> dict:
    """`encoder_hidden_states` plus `added_cond_kwargs` (pooled text embeds, time ids) for SDXL."""
    ids = [tokenize(tokenizer, captions, encoding.max_token_length) for tokenizer in tokenizers]
    count = max(encoder_ids.shape[1] for encoder_ids in ids)  # the two tokenizers may cut a caption differently
    ids = [_with_empty_chunks(tokenizer, encoder_ids, count) for tokenizer, encoder_ids in zip(tokenizers, ids)]
    hidden, pooled = [], None
    for encoder, encoder_ids in zip(text_encoders, ids):
        # Both encoders' penultimate layer whatever clip_skip says: A1111 1.10 and kohya ignore clip skip on SDXL.
        states, output = _hidden(encoder, encoder_ids.to(device), -2, final_norm=False)
        hidden.append(states)
        # The projection model's first output is its pooled, projected embedding; the first chunk's, as at inference.
        pooled = output[0].reshape(encoder_ids.shape[0], encoder_ids.shape[1], -1)[:, 0]
    time_ids = torch.tensor([[*size, *crop, *target_size] for size, crop in zip(original_sizes, crops)],
                            dtype=hidden[0].dtype, device=device)
    return {"encoder_hidden_states": torch.cat(hidden, dim=-1),
            "added_cond_kwargs": {"text_embeds": pooled, "time_ids": time_ids}}
