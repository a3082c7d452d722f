"""Turn one prompt text (emphasis, BREAK, embedding names; no AND, no editing) into CLIP hidden states.

Follows A1111 v1.10: 75-token chunks encoded separately and concatenated; each token's hidden
state is multiplied by its emphasis weight and (emphasis "Original") the chunk is rescaled so its
mean equals the unweighted mean. `encode_group` encodes several texts as one A1111 batch (the texts
of one prompt's schedule): shorter texts are padded with the empty chunk and the mean is restored over
the batch's chunk index as a whole, as A1111's `get_learned_conditioning` does; SD1/SD2 take `hidden_states[-clip_skip]` through the final layer
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

from mixkit.forward_patches import latest_forward_change
from mixkit.prompts.attention import BREAK_MARK, parse_prompt_attention
from mixkit.prompts.chunking import (
    BREAK_RUN, CHUNK_TOKENS, COMMA_BACKTRACK, PromptChunk, TokenRun, frame_chunk, split_into_chunks,
)
from mixkit.prompts.embeddings import SDXL_KEYS, EmbeddingLibrary
from mixkit.prompts.emphasis import DEFAULT_EMPHASIS, EMPHASIS_MODES, check_emphasis
from mixkit.prompts.limits import check_prompt_text

CACHE_SIZE = 256


@dataclass
class EncodedPrompt:
    hidden: torch.Tensor  # [T, D], T a multiple of 77; SDXL: D = dim1 + dim2
    pooled: torch.Tensor | None  # SDXL: [D2], projected EOS state of the first chunk; else None
    embeddings_used: dict = field(default_factory=dict)  # name -> `TextualInversion.infotext_hash` (sha256[:12])


@dataclass
class RawEncoding:
    """One text through the text encoder(s) before emphasis: per encoder z [C, 77, D] and weights [C, 77]."""

    z: list  # per text encoder
    weights: list  # per text encoder
    pooled: torch.Tensor | None
    embeddings_used: dict

    @property
    def chunks(self) -> int:
        return self.z[0].shape[0]


def check_comma_backtrack(value: object) -> int:
    """A1111's "Prompt word wrap length limit" (`comma_padding_backtrack`): an int in 0..74 (0 turns it off)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < CHUNK_TOKENS:
        raise ValueError(f"comma_padding_backtrack must be an int in 0..{CHUNK_TOKENS - 1} (tokens; A1111's 'Prompt "
                         f"word wrap length limit', default {COMMA_BACKTRACK}), got {value!r}")
    return value


def text_encoder_layers(text_encoders: list) -> int:
    """The largest clip skip the text encoders allow (their smallest layer count): what inference, training and the
    web UI check a clip skip against."""
    return min(encoder.config.num_hidden_layers for encoder in text_encoders)


class PromptEncoder:
    """Holds the tokenizer(s)/text encoder(s) of one model; encodes prompts and caches the results.

    The cache key includes the text encoders' parameter versions, so weights changed in place
    (e.g. a LoRA merged into them) invalidate it, and the settings that shape an encoding (clip skip,
    "Clip skip SDXL", emphasis, comma backtrack), so an encoder whose attribute is changed between calls
    never returns an encoding made under the old value; call `clear_cache()` after any other change
    (swapped modules, forward hooks, another embeddings library).
    """

    def __init__(self, tokenizers: list, text_encoders: list, *, is_sdxl: bool, clip_skip: int = 1,
                 emphasis: str = DEFAULT_EMPHASIS, embeddings: EmbeddingLibrary | None = None,
                 sdxl_clip_l_skip: bool = False, comma_backtrack: int = COMMA_BACKTRACK,
                 sdxl_refiner: bool = False) -> None:
        # `sdxl_refiner`: SDXL's refiner, whose only encoder is SDXL's second (OpenCLIP bigG: penultimate layer,
        # pooled projection, the `clip_g` vectors of an embedding), as A1111's FrozenOpenCLIPEmbedder2 serves both.
        kind = "the SDXL refiner" if sdxl_refiner else "SDXL" if is_sdxl else "SD1/SD2"
        expected = 1 if sdxl_refiner or not is_sdxl else 2
        if len(tokenizers) != len(text_encoders) or len(tokenizers) != expected:
            raise ValueError(f"expected {expected} tokenizer(s) and text encoder(s) for {kind}, got "
                             f"{len(tokenizers)} and {len(text_encoders)}")
        if sdxl_refiner and not is_sdxl:
            raise ValueError("sdxl_refiner=True needs is_sdxl=True (the refiner conditions like SDXL's second encoder)")
        self.emphasis_name = check_emphasis(emphasis)
        self.emphasis = EMPHASIS_MODES.get(self.emphasis_name)
        self.comma_backtrack = check_comma_backtrack(comma_backtrack)
        layers = text_encoder_layers(text_encoders)
        if isinstance(clip_skip, bool) or not isinstance(clip_skip, int) or not 1 <= clip_skip <= layers:
            raise ValueError(f"clip_skip must be an int in 1..{layers} (the text encoder's layer count), got {clip_skip!r}")
        if not isinstance(sdxl_clip_l_skip, bool):
            raise TypeError(f"sdxl_clip_l_skip must be True or False (A1111's 'Clip skip SDXL'), got {sdxl_clip_l_skip!r}")
        self.tokenizers = list(tokenizers)
        self.text_encoders = list(text_encoders)
        self.is_sdxl = is_sdxl
        self.sdxl_refiner = sdxl_refiner
        # Per text encoder: the key of its vectors in an embedding file ("" for SD1/SD2's single tensor).
        self.embedding_keys = SDXL_KEYS[1:] if sdxl_refiner else SDXL_KEYS if is_sdxl else ("",)
        self.clip_skip = clip_skip
        self.sdxl_clip_l_skip = sdxl_clip_l_skip
        self.embeddings = embeddings if embeddings is not None else EmbeddingLibrary()
        self._cache: OrderedDict = OrderedDict()  # (text, settings, weights version) -> RawEncoding
        self._groups: OrderedDict = OrderedDict()  # (texts, settings, weights version) -> [EncodedPrompt]
        self._name_tokens: list[dict[int, list[tuple[tuple[int, ...], str]]]] | None = None

    # ---- caching -------------------------------------------------------------------------------
    def clear_cache(self) -> None:
        self._cache.clear()
        self._groups.clear()
        self._name_tokens = None

    def _settings(self) -> tuple:
        """What besides the text and the weights decides an encoding: an encoder built with clip skip 1 whose
        `clip_skip` is set to 2 afterwards (a caller reusing one SDXL encoder across calls) must not answer a repeated
        prompt with the clip-skip-1 encoding it cached."""
        return self.clip_skip, self.sdxl_clip_l_skip, self.emphasis_name, self.emphasis, self.comma_backtrack

    def _weights_version(self) -> tuple:
        # A tensor's _version counts its in-place updates; device/dtype catch `.to(...)`, which
        # replaces the tensors; the forward stamp catches runtime-mode LoRAs, which write no parameter.
        return tuple((sum(p._version for p in encoder.parameters()), encoder.device, encoder.dtype,
                      latest_forward_change(encoder))
                     for encoder in self.text_encoders)

    def encode(self, text: str) -> EncodedPrompt:
        """Encode one schedule-free, AND-free prompt on its own (a batch of one); results are cached."""
        return self.encode_group([text])[0]

    def encode_group(self, texts: list[str] | tuple[str, ...]) -> list[EncodedPrompt]:
        """Encode texts as one A1111 batch: the texts of one prompt's schedule, repeats included.

        Every result has the batch's chunk count (shorter texts continue with the empty prompt's chunk)
        and emphasis is applied per chunk index over the whole batch, as A1111's
        `FrozenCLIPEmbedderWithCustomWordsBase.forward`: "Original" restores one mean for all of them.
        """
        texts = tuple(check_prompt_text(text) for text in texts)
        if not texts:
            raise ValueError("encode_group needs at least one text")
        key = (texts, self._settings(), self._weights_version())
        if key in self._groups:
            self._groups.move_to_end(key)
            return self._groups[key]
        with torch.no_grad():
            raws = [self._raw(text) for text in texts]
            encoded = self._emphasised(texts, raws)
        self._groups[key] = encoded
        if len(self._groups) > CACHE_SIZE:
            self._groups.popitem(last=False)
        return encoded

    def _raw(self, text: str) -> RawEncoding:
        key = (text, self._settings(), self._weights_version())
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        raw = self._encode_raw(text)
        self._cache[key] = raw
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return raw

    def _emphasised(self, texts: tuple[str, ...], raws: list[RawEncoding]) -> list[EncodedPrompt]:
        chunks = max(raw.chunks for raw in raws)
        empty = self._raw("") if any(raw.chunks < chunks for raw in raws) else None
        hidden_per_encoder = []
        for which in range(len(self.text_encoders)):
            z = torch.stack([_padded(raw.z[which], empty.z[which] if empty else None, chunks) for raw in raws])
            weights = torch.stack([_padded(raw.weights[which], empty.weights[which] if empty else None, chunks)
                                   for raw in raws])
            per_chunk = [self.emphasis.apply(z[:, index], weights[:, index]) for index in range(chunks)]
            hidden_per_encoder.append(torch.stack(per_chunk, dim=1).reshape(len(raws), -1, z.shape[-1]))
        hidden = torch.cat(hidden_per_encoder, dim=-1)
        results = []
        for text, raw, row in zip(texts, raws, hidden):
            if not torch.isfinite(row).all():
                raise ValueError(
                    f"prompt {text[:60]!r} encodes to non-finite values (emphasis weights too extreme, "
                    f"or the weighted chunk mean is zero); use moderate weights or emphasis 'No norm'."
                )
            results.append(EncodedPrompt(hidden=row, pooled=raw.pooled, embeddings_used=dict(raw.embeddings_used)))
        return results

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
                    embedding = self.embeddings.get(name)
                    embedding.check_fits_a_chunk()
                    return name, len(name_ids), embedding.num_vectors
            return None

        comma = tokenizer.get_vocab().get(",</w>")
        return split_into_chunks(token_runs, comma_token=comma, find_embedding=find_embedding if index else None,
                                 comma_backtrack=self.comma_backtrack)

    # ---- encoding ------------------------------------------------------------------------------
    def _encode_raw(self, text: str) -> RawEncoding:
        z_parts, weight_parts, pooled, used = [], [], None, {}
        for which in range(len(self.text_encoders)):
            z, weights, pooled_which = self._encode_chunks(self.chunks_for(text, which), which, used)
            z_parts.append(z)
            weight_parts.append(weights)
            if self.is_sdxl and which == len(self.text_encoders) - 1:  # OpenCLIP bigG's projection
                pooled = pooled_which
        counts = [z.shape[0] for z in z_parts]
        if len(set(counts)) != 1:
            raise ValueError(f"the two SDXL tokenizers split {text[:60]!r} into {counts} chunks; they must agree")
        return RawEncoding(z=z_parts, weights=weight_parts, pooled=pooled, embeddings_used=used)

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
        key = self.embedding_keys[which]
        replacements = []  # (chunk index, first position, vectors)
        for chunk_index, chunk in enumerate(chunks):
            for offset, name in chunk.fixes:
                embedding = self.embeddings.get(name)
                vectors = embedding.vectors_for(key, dim, "SDXL" if self.is_sdxl else "SD1/SD2")
                replacements.append((chunk_index, offset + 1, vectors))
                used[name] = embedding.infotext_hash

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
            # CLIP-L (SDXL base's first encoder) honours clip skip only with A1111's "Clip skip SDXL" option;
            # OpenCLIP bigG always gives its penultimate layer.
            clip_l = which == 0 and not self.sdxl_refiner
            z = outputs.hidden_states[-self.clip_skip if clip_l and self.sdxl_clip_l_skip else -2]
        elif self.clip_skip == 1:
            z = outputs.last_hidden_state
        else:
            # transformers 5 flattened CLIPTextModel; older versions nest the layers under .text_model
            z = getattr(encoder, "text_model", encoder).final_layer_norm(outputs.hidden_states[-self.clip_skip])
        pooled = outputs.text_embeds[0] if getattr(outputs, "text_embeds", None) is not None else None
        return z, weights.to(z.dtype), pooled


def _padded(values: torch.Tensor, empty: torch.Tensor | None, chunks: int) -> torch.Tensor:
    """[C, ...] -> [chunks, ...]: A1111's `empty_chunk()` (the empty prompt's chunk 0) after the text's own."""
    missing = chunks - values.shape[0]
    return torch.cat([values, empty[:1].expand(missing, *values.shape[1:])]) if missing > 0 else values


def chunk_count(encoder: PromptEncoder, text: str) -> int:
    """How many 77-token chunks `text` becomes (the UI's token counter shows this)."""
    return len(encoder.chunks_for(check_prompt_text(text)))


__all__ = ["CHUNK_TOKENS", "EncodedPrompt", "PromptEncoder", "chunk_count"]
