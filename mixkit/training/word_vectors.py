"""Trigger-word vectors trained with a LoRA (pivotal tuning), saved in its file as A1111 bundled embeddings.

Why: a word the base data never had enters the text encoder as a token vector that no training ever
moved, so a LoRA has to build the new concept downstream of an input that says almost nothing, and the
LoRA layers it changes for that word change every other word too. Training the word's own input vectors
(textual inversion) alongside the LoRA gives the concept a place of its own; the vectors travel in the
LoRA file (`bundle_emb.<word>.*`, which A1111 and mixkit read), so the file stays one kohya LoRA.
"""

from __future__ import annotations

import torch
from torch import nn


def check_words(words: object) -> None:
    """Raise ValueError unless `words` is a list of distinct, non-empty words a file key can hold."""
    if not isinstance(words, list) or not all(isinstance(w, str) and w.strip() == w and w for w in words):
        raise ValueError(f"train_word_vectors must be a list of non-empty words without surrounding spaces, "
                         f"got {words!r}")
    if len(set(words)) != len(words):
        raise ValueError(f"train_word_vectors lists a word twice: {words!r}")
    dotted = [w for w in words if "." in w]
    if dotted:
        raise ValueError(f"train_word_vectors {dotted!r}: a bundled embedding's name cannot contain '.' "
                         "(the file key is bundle_emb.<word>.*)")


def _occurrences(ids: torch.Tensor, sequence: torch.Tensor) -> list[tuple[int, int]]:
    """(row, start) of every place `sequence` appears in the rows of `ids` (batch, length)."""
    if ids.shape[1] < len(sequence):
        return []
    windows = ids.unfold(1, len(sequence), 1)
    hits = (windows == sequence.to(ids.device)).all(dim=-1).nonzero().tolist()
    return [(row, start) for row, start in hits]


class TrainedWordVectors(nn.Module):
    """The input vectors of some words, per text encoder, swapped in wherever the word's tokens appear.

    Starts from the encoder's own vectors for the word's tokens, so step 0 is the unchanged model.
    """

    def __init__(self, text_encoders: list[nn.Module], tokenizers: list, words: list[str]) -> None:
        super().__init__()
        check_words(words)
        self.words = list(words)
        self._encoders = list(text_encoders)
        self._token_ids: list[list[torch.Tensor]] = []  # [encoder][word] -> token ids
        self.vectors = nn.ParameterList()  # index: encoder * len(words) + word
        self._hooks: list = []
        for encoder, tokenizer in zip(text_encoders, tokenizers):
            table = encoder.get_input_embeddings().weight
            per_word = []
            for word in words:
                ids = tokenizer(word, add_special_tokens=False).input_ids
                if not ids:
                    raise ValueError(f"the tokenizer turns {word!r} into no tokens; pick a word the prompt can hold")
                per_word.append(torch.tensor(ids))
                self.vectors.append(nn.Parameter(table[ids].detach().float().clone()))
            self._token_ids.append(per_word)

    def _swap_in(self, encoder_index: int, ids: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
        replaced = output
        for word_index, sequence in enumerate(self._token_ids[encoder_index]):
            places = _occurrences(ids, sequence)
            if not places:
                continue
            if replaced is output:
                replaced = output.clone()
            vectors = self.vectors[encoder_index * len(self.words) + word_index].to(output.dtype)
            for row, start in places:
                replaced[row, start:start + len(sequence)] = vectors
        return replaced

    def attach(self) -> "TrainedWordVectors":
        self.detach()
        for index, encoder in enumerate(self._encoders):
            self._hooks.append(encoder.get_input_embeddings().register_forward_hook(
                lambda _m, args, out, i=index: self._swap_in(i, args[0], out)))
        return self

    def detach(self) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()

    def bundled_tensors(self) -> dict[str, torch.Tensor]:
        """`bundle_emb.<word>.*` tensors: `string_to_param.*` for one encoder, `clip_l`/`clip_g` for SDXL's two."""
        from mixkit.lora.bundled_embeddings import bundled_embedding_tensors

        keys = [""] if len(self._encoders) == 1 else ["clip_l", "clip_g"]
        tensors = {}
        for word_index, word in enumerate(self.words):
            vectors = {key: self.vectors[e * len(self.words) + word_index].detach().float().cpu().clone()
                       for e, key in enumerate(keys)}
            tensors.update(bundled_embedding_tensors(word, vectors))
        return tensors
