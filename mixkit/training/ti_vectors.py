"""The vectors a textual-inversion run trains, put into the text encoders wherever the token string appears.

Why hooks instead of kohya's new tokenizer entries: kohya adds `token_string`, `token_string1`, ... to the
tokenizer, grows the embedding table, trains the whole table and copies the old rows back after every step.
mixkit leaves tokenizer and table alone (a caller's model comes back bit-identical) and does during training what
generation does with an embeddings-folder file (`mixkit.prompts.encoder`): the token string's tokens become
`num_vectors` placeholder positions, and the embedding layer's output there is replaced by the trained vectors. So
the vectors are the only parameters (no gradient mask to get wrong), and a caption that fits one 75-token chunk is
conditioned exactly as the same prompt is with the saved file (tested against `PromptEncoder`). With
`max_token_length` 150/225 each 75-token chunk is expanded on its own: a chunk the vectors lengthen past 75 tokens
loses its end, and a token string cut by a chunk boundary stays text (generation would move both to the next chunk).
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from torch import nn

from mixkit.prompts.chunking import CHUNK_TOKENS, PLACEHOLDER_TOKEN
from mixkit.training.text_conditioning import tokenize

logger = logging.getLogger(__name__)


def initial_vectors(text_encoders: list, tokenizers: list, num_vectors: int, init_word: str | None, *,
                    spread: bool = False) -> list:
    """Per text encoder, the [num_vectors, dim] starting vectors: the input vectors of `init_word`'s tokens, repeated
    or cut to `num_vectors` as kohya's `--init_word` does (vector i is token i mod the token count); zeros without
    an init word, as A1111 starts an embedding whose "Initialization text" is empty.

    `spread=True` picks them as A1111's "Create embedding" does instead: vector i is token i * count // num_vectors,
    so a long text is sampled across its whole length and a short one has each token repeated in place."""
    vectors = []
    for index, (encoder, tokenizer) in enumerate(zip(text_encoders, tokenizers)):
        table = encoder.get_input_embeddings().weight
        if init_word is None:
            vectors.append(torch.zeros(num_vectors, table.shape[1]))
            continue
        ids = tokenizer(init_word, add_special_tokens=False).input_ids
        if not ids:
            raise ValueError(f"init_word {init_word!r} is no token at all for the tokenizer; give a word like 'dog' "
                             "(or leave init_word out to start from zero vectors)")
        if spread:
            vectors.append(torch.stack([table[ids[i * len(ids) // num_vectors]] for i in range(num_vectors)])
                           .detach().float().clone())
            continue
        if len(ids) > 1 and len(ids) != num_vectors:
            logger.warning("init_word %r is %d tokens for text encoder %d but num_vectors_per_token is %d: its vectors "
                           "are repeated or cut, as kohya does", init_word, len(ids), index + 1, num_vectors)
        vectors.append(torch.stack([table[ids[i % len(ids)]] for i in range(num_vectors)]).detach().float().clone())
    return vectors


def vectors_from_file(path: str | Path, text_encoders: list, is_sdxl: bool, num_vectors: int) -> list:
    """Per text encoder, the vectors of an existing embedding file (kohya's `--weights`: continue from it), read by
    the loader generation uses; refused when it was made for other text encoders or holds another vector count."""
    from mixkit.prompts.embeddings import encoder_widths, fit_problem, load_textual_inversion

    embedding = load_textual_inversion(path)
    widths = encoder_widths(text_encoders, is_sdxl)
    problem = fit_problem(embedding, widths)
    if problem is not None:
        raise ValueError(f"weights {str(path)!r} cannot start this run: {problem}")
    if embedding.num_vectors != num_vectors:
        raise ValueError(f"weights {str(path)!r} holds {embedding.num_vectors} vectors per token but "
                         f"num_vectors_per_token is {num_vectors}; set num_vectors_per_token={embedding.num_vectors}")
    kind = "SDXL" if is_sdxl else "SD1/SD2"
    return [embedding.vectors_for(key, width, kind).clone() for key, width in widths]


def occurrences(tokens: list[int], name: tuple[int, ...]) -> list[int]:
    """Start positions of `name` in `tokens`, scanning left to right and skipping over each match, as the prompt
    chunker finds embedding names."""
    starts, position = [], 0
    while position <= len(tokens) - len(name):
        if tuple(tokens[position:position + len(name)]) == name:
            starts.append(position)
            position += len(name)
        else:
            position += 1
    return starts


def token_string_ids(tokenizer, token_string: str) -> tuple[int, ...]:
    """The token ids the vectors replace: how `tokenizer` writes the token string (CLIP's lower-cases it)."""
    name = tuple(tokenizer(token_string, add_special_tokens=False).input_ids)
    if not name:
        raise ValueError(f"token_string {token_string!r} is no token at all for the tokenizer; pick a word "
                         "like 'sks_dog'")
    return name


def holds_token_string(captions: list[str], tokenizer, token_string: str, num_vectors: int,
                       max_token_length: int = CHUNK_TOKENS) -> list[bool]:
    """Whether training puts the vectors into each caption: the token string as a run of its tokens ("SksDog" is in
    "sksdog", "cat" not in "concatenate" when "cat" ends a token there) within the chunks the caption is encoded in
    (`text_conditioning.tokenize`), where `expand_token_string` finds room for the vectors."""
    name = token_string_ids(tokenizer, token_string)
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    return [any(expand_token_string(chunk, name, num_vectors, eos, pad)[1] for chunk in chunks.tolist())
            for chunks in tokenize(tokenizer, captions, max_token_length)]


def expand_token_string(row: list[int], name: tuple[int, ...], num_vectors: int, eos: int,
                        pad: int) -> tuple[list[int], list[int]]:
    """One framed 77-token row (BOS, text, EOS, padding) with every `name` run replaced by `num_vectors`
    placeholders, and where each run of placeholders starts. The text stays within 75 tokens; an embedding that
    would cross the end is left out with everything after it, as the prompt chunker moves it to the next chunk."""
    end = row.index(eos, 1) if eos in row[1:] else len(row) - 1
    text = row[1:end]
    starts = occurrences(text, name)
    if not starts:
        return row, []
    expanded, places, previous = [], [], 0
    for start in starts:
        expanded += text[previous:start]
        if len(expanded) + num_vectors > CHUNK_TOKENS:
            break
        places.append(1 + len(expanded))  # after BOS
        expanded += [PLACEHOLDER_TOKEN] * num_vectors
        previous = start + len(name)
    else:
        expanded += text[previous:]
    expanded = expanded[:CHUNK_TOKENS]
    framed = [row[0], *expanded, eos]
    return framed + [pad] * (len(row) - len(framed)), places


class TextualInversionVectors(nn.Module):
    """The trained vectors of one token string, per text encoder (`vectors[i]`: [num_vectors, dim] of encoder i).

    While attached, every forward pass of the text encoders sees the token string as its vectors; detached, the
    encoders are exactly what they were.
    """

    def __init__(self, text_encoders: list, tokenizers: list, token_string: str, initial: list) -> None:
        super().__init__()
        self.token_string = token_string
        self.vectors = nn.ParameterList([nn.Parameter(v.detach().float().clone()) for v in initial])
        self._encoders = list(text_encoders)
        self._eos = [tokenizer.eos_token_id for tokenizer in tokenizers]
        # What follows EOS in a row, as the prompt encoder frames a chunk (`frame_chunk`).
        self._pad = [t.pad_token_id if t.pad_token_id is not None else t.eos_token_id for t in tokenizers]
        self._names = [token_string_ids(tokenizer, token_string) for tokenizer in tokenizers]
        self._places: list[list[tuple[int, int]]] = [[] for _ in text_encoders]
        self._hooks: list = []

    @property
    def num_vectors(self) -> int:
        return int(self.vectors[0].shape[0])

    def _rewrite_ids(self, index: int, args: tuple, kwargs: dict):
        ids = kwargs["input_ids"] if "input_ids" in kwargs else args[0]
        rows, places = [], []
        for row_index, row in enumerate(ids.tolist()):
            row, starts = expand_token_string(row, self._names[index], self.num_vectors, self._eos[index],
                                                self._pad[index])
            rows.append(row)
            places += [(row_index, start) for start in starts]
        self._places[index] = places
        if not places:
            return None
        new_ids = torch.tensor(rows, dtype=ids.dtype, device=ids.device)
        if "input_ids" in kwargs:
            return args, {**kwargs, "input_ids": new_ids}
        return (new_ids, *args[1:]), kwargs

    def _insert_vectors(self, index: int, output: torch.Tensor) -> torch.Tensor:
        places, self._places[index] = self._places[index], []
        if not places:
            return output
        output = output.clone()
        vectors = self.vectors[index].to(output.dtype)
        for row, start in places:
            output[row, start:start + self.num_vectors] = vectors
        return output

    def attach(self) -> "TextualInversionVectors":
        self.detach()
        for index, encoder in enumerate(self._encoders):
            self._hooks.append(encoder.register_forward_pre_hook(
                lambda _m, args, kwargs, i=index: self._rewrite_ids(i, args, kwargs), with_kwargs=True))
            self._hooks.append(encoder.get_input_embeddings().register_forward_hook(
                lambda _m, _args, output, i=index: self._insert_vectors(i, output)))
        return self

    def detach(self) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()
        self._places = [[] for _ in self._encoders]

    def file_tensors(self) -> dict[str, torch.Tensor]:
        """The tensors of the embedding file as kohya writes them: `emb_params` for one text encoder (SD 1.x/2.x),
        `clip_l` and `clip_g` for SDXL's two."""
        keys = ["emb_params"] if len(self.vectors) == 1 else ["clip_l", "clip_g"]
        return {key: vectors.detach().float().cpu().clone() for key, vectors in zip(keys, self.vectors)}
