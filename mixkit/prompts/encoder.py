"""Turn one prompt text (emphasis, BREAK, embedding names; no AND, no editing) into CLIP hidden states.

Follows A1111 v1.10: 75-token chunks encoded separately and concatenated; each token's hidden
state is multiplied by its emphasis weight and (emphasis "Original") the chunk is rescaled so its
mean equals the unweighted mean; SD1/SD2 take `hidden_states[-clip_skip]` through the final layer
norm; SDXL concatenates both encoders' penultimate hidden states (no final norm, like diffusers)
and takes the pooled embedding from the second encoder's first chunk. With a plain prompt of at
most 75 tokens this equals diffusers' `encode_prompt` (tested).

Clip skip on SDXL is A1111's: it has no effect. A1111 1.10 reads CLIP-L at its fixed penultimate
layer (`FrozenCLIPEmbedderForSDXLWithCustomWords`, `layer_idx`) and CLIP-G always at its
"penultimate" layer (`FrozenOpenCLIPEmbedder2WithCustomWords`), whatever "Clip skip" says, and kohya's
SDXL training ignores `clip_skip` too. So an SDXL infotext with "Clip skip: 2" gives the image of
"Clip skip: 1". A1111's off-by-default option "Clip skip SDXL" (`sdxl_clip_l_skip`) is
`sdxl_clip_l_skip=True` here (as in A1111 it changes nothing on SD 1.x/2.x): CLIP-L then reads
`hidden_states[-clip_skip]` (no final norm, so clip skip 1 is the last layer before its norm and
2 the default), CLIP-G stays penultimate.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import torch

from mixkit.prompts.attention import BREAK_MARK, parse_prompt_attention
from mixkit.prompts.chunking import BREAK_RUN, CHUNK_TOKENS, PromptChunk, TokenRun, frame_chunk, split_into_chunks
from mixkit.prompts.embeddings import EmbeddingLibrary
from mixkit.prompts.emphasis import EMPHASIS_MODES
from mixkit.prompts.limits import check_prompt_text

CACHE_SIZE = 256


@dataclass
class EncodedPrompt:
    hidden: torch.Tensor  # [T, D], T a multiple of 77; SDXL: D = dim1 + dim2
    pooled: torch.Tensor | None  # SDXL: [D2], projected EOS state of the first chunk; else None
    embeddings_used: dict = field(default_factory=dict)  # name -> A1111 shorthash (sha256[:12])


def text_encoder_layers(text_encoders: list) -> int:
    """The largest clip skip the text encoders allow (their smallest layer count): what inference, training and the
    web UI check a clip skip against."""
    return min(encoder.config.num_hidden_layers for encoder in text_encoders)


class PromptEncoder:
    """Holds the tokenizer(s)/text encoder(s) of one model; encodes prompts and caches the results.

    The cache key includes the text encoders' parameter versions, so weights changed in place
    (e.g. a LoRA merged into them) invalidate it; call `clear_cache()` after any other change
    (swapped modules, forward hooks).
    """

    def __init__(self, tokenizers: list, text_encoders: list, *, is_sdxl: bool, clip_skip: int = 1,
                 emphasis: str = "Original", embeddings: EmbeddingLibrary | None = None,
                 sdxl_clip_l_skip: bool = False) -> None:
        if len(tokenizers) != len(text_encoders) or len(tokenizers) != (2 if is_sdxl else 1):
            raise ValueError(
                f"expected {2 if is_sdxl else 1} tokenizer(s) and text encoder(s) for "
                f"{'SDXL' if is_sdxl else 'SD1/SD2'}, got {len(tokenizers)} and {len(text_encoders)}"
            )
        self.emphasis = EMPHASIS_MODES.get(emphasis)
        self.emphasis_name = emphasis
        layers = text_encoder_layers(text_encoders)
        if isinstance(clip_skip, bool) or not isinstance(clip_skip, int) or not 1 <= clip_skip <= layers:
            raise ValueError(f"clip_skip must be an int in 1..{layers} (the text encoder's layer count), got {clip_skip!r}")
        if not isinstance(sdxl_clip_l_skip, bool):
            raise TypeError(f"sdxl_clip_l_skip must be True or False (A1111's 'Clip skip SDXL'), got {sdxl_clip_l_skip!r}")
        self.tokenizers = list(tokenizers)
        self.text_encoders = list(text_encoders)
        self.is_sdxl = is_sdxl
        self.clip_skip = clip_skip
        self.sdxl_clip_l_skip = sdxl_clip_l_skip
        self.embeddings = embeddings if embeddings is not None else EmbeddingLibrary()
        self._cache: OrderedDict = OrderedDict()
        self._name_tokens: list[dict[int, list[tuple[tuple[int, ...], str]]]] | None = None

    # ---- caching -------------------------------------------------------------------------------
    def clear_cache(self) -> None:
        self._cache.clear()
        self._name_tokens = None

    def _weights_version(self) -> tuple:
        # A tensor's _version counts its in-place updates; device/dtype catch `.to(...)`, which
        # replaces the tensors.
        return tuple((sum(p._version for p in encoder.parameters()), encoder.device, encoder.dtype)
                     for encoder in self.text_encoders)

    def encode(self, text: str) -> EncodedPrompt:
        """Encode one schedule-free, AND-free prompt; identical texts come from the cache."""
        check_prompt_text(text)
        key = (text, self._weights_version())
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        with torch.no_grad():
            encoded = self._encode_uncached(text)
        self._cache[key] = encoded
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return encoded

    # ---- tokenizing ----------------------------------------------------------------------------
    def _runs(self, text: str) -> list[tuple[str, float]]:
        if not self.emphasis.parse:
            return [(text, 1.0)]
        return [(run, weight) for run, weight in parse_prompt_attention(text)]

    def _embedding_index(self, which: int) -> dict[int, list[tuple[tuple[int, ...], str]]]:
        if self._name_tokens is None:
            self._name_tokens = [{} for _ in self.tokenizers]
            for index, tokenizer in enumerate(self.tokenizers):
                table = self._name_tokens[index]
                for name in self.embeddings.names_for(self.text_encoders, self.is_sdxl):  # other families: plain text
                    ids = tuple(tokenizer(name, add_special_tokens=False)["input_ids"])
                    if ids:
                        table.setdefault(ids[0], []).append((ids, name))
                for entries in table.values():
                    entries.sort(key=lambda entry: -len(entry[0]))
        return self._name_tokens[which]

    def chunks_for(self, text: str, which: int = 0) -> list[PromptChunk]:
        """The chunks (before BOS/EOS framing) one text encoder sees for `text`."""
        tokenizer = self.tokenizers[which]
        runs = self._runs(text)
        plain = [run for run, weight in runs if not (run == "BREAK" and weight == BREAK_MARK)]
        ids = tokenizer(plain, add_special_tokens=False, truncation=False)["input_ids"] if plain else []
        token_runs: list[TokenRun] = []
        ids_iter = iter(ids)
        for run, weight in runs:
            if run == "BREAK" and weight == BREAK_MARK:
                token_runs.append(BREAK_RUN)
            else:
                token_runs.append(TokenRun(tuple(next(ids_iter)), float(weight)))
        index = self._embedding_index(which)

        def find_embedding(tokens: tuple, position: int):
            for name_ids, name in index.get(tokens[position], ()):
                if tokens[position:position + len(name_ids)] == name_ids:
                    return name, len(name_ids), self.embeddings.get(name).num_vectors
            return None

        comma = tokenizer.get_vocab().get(",</w>")
        return split_into_chunks(token_runs, comma_token=comma, find_embedding=find_embedding if index else None)

    # ---- encoding ------------------------------------------------------------------------------
    def _encode_uncached(self, text: str) -> EncodedPrompt:
        hidden_parts, pooled, used = [], None, {}
        chunk_counts = []
        for which, (tokenizer, encoder) in enumerate(zip(self.tokenizers, self.text_encoders)):
            chunks = self.chunks_for(text, which)
            chunk_counts.append(len(chunks))
            hidden, pooled_which = self._encode_chunks(chunks, which, used)
            hidden_parts.append(hidden)
            if self.is_sdxl and which == 1:
                pooled = pooled_which
        if len(set(chunk_counts)) != 1:
            raise ValueError(f"the two SDXL tokenizers split {text[:60]!r} into {chunk_counts} chunks; they must agree")
        hidden = torch.cat(hidden_parts, dim=-1)
        if not torch.isfinite(hidden).all():
            raise ValueError(
                f"prompt {text[:60]!r} encodes to non-finite values (emphasis weights too extreme, "
                f"or the weighted chunk mean is zero); use moderate weights or emphasis 'No norm'."
            )
        return EncodedPrompt(hidden=hidden, pooled=pooled, embeddings_used=used)

    def _encode_chunks(self, chunks: list[PromptChunk], which: int, used: dict):
        tokenizer, encoder = self.tokenizers[which], self.text_encoders[which]
        bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
        framed = [frame_chunk(chunk, bos=bos, eos=eos, pad=pad) for chunk in chunks]
        device = next(encoder.parameters()).device
        ids = torch.tensor([f[0] for f in framed], dtype=torch.long, device=device)
        weights = torch.tensor([f[1] for f in framed], dtype=torch.float32, device=device)

        embedding_layer = encoder.get_input_embeddings()
        dim = embedding_layer.embedding_dim
        key = ("clip_l", "clip_g")[which] if self.is_sdxl else ""
        replacements = []  # (chunk index, first position, vectors)
        for chunk_index, chunk in enumerate(chunks):
            for offset, name in chunk.fixes:
                embedding = self.embeddings.get(name)
                vectors = embedding.vectors_for(key, dim, "SDXL" if self.is_sdxl else "SD1/SD2")
                replacements.append((chunk_index, offset + 1, vectors))
                used[name] = embedding.shorthash

        def insert_vectors(module, inputs, output):
            output = output.clone()
            for chunk_index, start, vectors in replacements:
                output[chunk_index, start:start + vectors.shape[0]] = vectors.to(output.dtype)
            return output

        hook = embedding_layer.register_forward_hook(insert_vectors) if replacements else None
        try:
            outputs = encoder(input_ids=ids, output_hidden_states=True)
        finally:
            if hook is not None:
                hook.remove()

        if self.is_sdxl:
            # CLIP-L (which == 0) honours clip skip only with A1111's "Clip skip SDXL" option.
            z = outputs.hidden_states[-self.clip_skip if which == 0 and self.sdxl_clip_l_skip else -2]
        elif self.clip_skip == 1:
            z = outputs.last_hidden_state
        else:
            # transformers 5 flattened CLIPTextModel; older versions nest the layers under .text_model
            z = getattr(encoder, "text_model", encoder).final_layer_norm(outputs.hidden_states[-self.clip_skip])
        pooled = outputs.text_embeds[0] if getattr(outputs, "text_embeds", None) is not None else None
        z = self.emphasis.apply(z, weights.to(z.dtype))
        return z.reshape(-1, z.shape[-1]), pooled


def chunk_count(encoder: PromptEncoder, text: str) -> int:
    """How many 77-token chunks `text` becomes (the UI's token counter shows this)."""
    return len(encoder.chunks_for(check_prompt_text(text)))


__all__ = ["CHUNK_TOKENS", "EncodedPrompt", "PromptEncoder", "chunk_count"]
