"""Textual-inversion embeddings: files in a folder, used in prompts by file name.

Formats (as A1111 v1.10 reads them): A1111 `.pt`/`.bin` with `string_to_param` (one tensor
[n, dim]); a single-tensor `.safetensors`/`.pt` (`emb_params` from kohya, `*`, or any one key);
SDXL files with both `clip_l` [n, 768] and `clip_g` [n, 1280]. Files are read through mixkit.io (format
decided by content; pickles scanned, then read with `torch.load(weights_only=True)`), so a file that
needs code execution is refused, never run, and the refusal names what it imports.

A file that cannot be read is *skipped*: it is no embedding name, so a prompt word that matches it
stays plain text (as in A1111), and `EmbeddingLibrary.skipped()` says why (the web UI logs it).
Files load on first use of the library's names and are kept while they are unchanged. Suffixes match in any case
(`.PT`, `.SafeTensors`), as A1111's `load_from_file` upper-cases them before comparing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from mixkit.errors import CheckpointFormatError, ModelNotFoundError

logger = logging.getLogger(__name__)

EMBEDDING_SUFFIXES = (".safetensors", ".pt", ".bin")
SDXL_KEYS = ("clip_l", "clip_g")


class BundledInLora(str):
    """A `TI hashes` value that is the name of the LoRA whose file bundles the word's vectors, not a file hash."""


@dataclass
class TextualInversion:
    """One loaded embedding. `vectors` maps "" (single-encoder file) or "clip_l"/"clip_g" to [n, dim]."""

    name: str
    path: Path
    vectors: dict = field(repr=False)
    sha256: str = ""
    # A1111's training metadata in its .pt files (what /sdapi/v1/embeddings reports); None when the file has none.
    step: int | None = None
    sd_checkpoint: str | None = None
    sd_checkpoint_name: str | None = None
    # The name of the applied LoRA whose file bundles these vectors (None: an embedding file of its own).
    bundled_in: str | None = None

    @property
    def shorthash(self) -> str:
        """First 12 hex digits of the file's sha256: what A1111 writes in the `TI hashes` infotext."""
        return self.sha256[:12]

    @property
    def infotext_hash(self) -> str:
        """What `TI hashes` writes after this embedding's word: its file's shorthash, or for vectors bundled in a LoRA
        the LoRA's name as its tag named it (A1111's Lora extension gives them `BundledTIHash(name)`, which its
        `lora_bundled_ti_to_infotext` option, on by default, prints as that name), so "word: lora" tells a reader
        which LoRA's `Lora hashes` entry the word's vectors came from. The name comes as a `BundledInLora`, so
        `ti_hashes_infotext` can leave it out when that option is off."""
        return BundledInLora(self.bundled_in) if self.bundled_in is not None else self.shorthash

    @property
    def num_vectors(self) -> int:
        return int(next(iter(self.vectors.values())).shape[0])

    def vectors_for(self, key: str, dim: int, model_kind: str):
        """The [n, dim] vectors for one text encoder ("" for SD1/SD2, "clip_l"/"clip_g" for SDXL)."""
        if key and key not in self.vectors:
            raise ValueError(
                f"embedding {self.name!r} ({self.path}) is a single-encoder SD1/SD2 embedding "
                f"(dim {self.num_dims()}); {model_kind} needs an embedding with {' and '.join(SDXL_KEYS)} tensors. "
                f"Use an SDXL version of this embedding or remove its name from the prompt."
            )
        if not key and "" not in self.vectors:
            raise ValueError(
                f"embedding {self.name!r} ({self.path}) is an SDXL embedding (clip_l/clip_g); "
                f"{model_kind} needs a single-tensor embedding of dim {dim}."
            )
        vectors = self.vectors[key]
        if vectors.shape[-1] != dim:
            raise ValueError(
                f"embedding {self.name!r} ({self.path}) has vectors of dim {vectors.shape[-1]}"
                f"{' for ' + key if key else ''}, but this {model_kind} text encoder needs dim {dim}; "
                f"it was trained for a different model family."
            )
        return vectors

    def check_fits_a_chunk(self) -> None:
        """Refuse, naming the file and the fix, an embedding too long for one prompt chunk (75 tokens).

        Its vectors must sit in one chunk (CLIP sees 77 positions: BOS, 75 tokens, EOS). A1111 lists such a file as
        loaded and then fails deep inside CLIP ("size of tensor ... must match ... 77") when a prompt uses it; here
        the prompt is refused before any encoding, with what to do.
        """
        from mixkit.prompts.chunking import CHUNK_TOKENS

        if self.num_vectors > CHUNK_TOKENS:
            raise ValueError(
                f"embedding {self.name!r} ({self.path}) has {self.num_vectors} vectors per token, more than the "
                f"{CHUNK_TOKENS} one prompt chunk holds (CLIP's 77 positions less start and end), so no prompt can use "
                f"it (A1111 fails on it too). Remove {self.name!r} from the prompt, or use a version of the embedding "
                f"with at most {CHUNK_TOKENS} vectors (retrain it with a smaller num_vectors_per_token)."
            )

    def num_dims(self) -> str:
        return "+".join(str(v.shape[-1]) for v in self.vectors.values())


def _read_tensor_file(path: Path) -> object:
    """The one place embedding files are deserialized: mixkit.io's reader, which decides the format by content."""
    from mixkit.io.loading import read_checkpoint

    return read_checkpoint(path)


def training_metadata(data: object) -> dict:
    """`step`, `sd_checkpoint`, `sd_checkpoint_name` as A1111's textual-inversion trainer saves them (None if absent)."""
    data = data if isinstance(data, dict) else {}
    step = data.get("step")
    values = {"step": step if isinstance(step, int) and not isinstance(step, bool) else None}
    for key in ("sd_checkpoint", "sd_checkpoint_name"):
        value = data.get(key)
        values[key] = value if isinstance(value, str) else None
    return values


def embedding_vectors_from_data(data: object, path: Path) -> dict:
    """Normalize the formats above to {"" or "clip_l"/"clip_g": float32 [n, dim]}."""
    import torch

    def as_matrix(value: object, key: str) -> "torch.Tensor":
        if not isinstance(value, torch.Tensor) or value.ndim not in (1, 2) or value.numel() == 0:
            raise CheckpointFormatError(
                f"embedding file {path}: {key!r} must be a non-empty [vectors, dim] tensor, got "
                f"{getattr(value, 'shape', type(value).__name__)}"
            )
        value = value.detach().to(torch.float32)
        if not torch.isfinite(value).all():
            raise CheckpointFormatError(f"embedding file {path}: {key!r} contains NaN or infinite values")
        return value.unsqueeze(0) if value.ndim == 1 else value

    if not isinstance(data, dict):
        raise CheckpointFormatError(f"embedding file {path} holds a {type(data).__name__}, not a dict of tensors")
    if "string_to_param" in data:
        params = data["string_to_param"]
        if not isinstance(params, dict) or len(params) != 1:
            raise CheckpointFormatError(f"embedding file {path}: 'string_to_param' must hold exactly one tensor")
        return {"": as_matrix(next(iter(params.values())), "string_to_param")}
    if all(key in data for key in SDXL_KEYS):
        vectors = {key: as_matrix(data[key], key) for key in SDXL_KEYS}
        if vectors["clip_l"].shape[0] != vectors["clip_g"].shape[0]:
            raise CheckpointFormatError(f"embedding file {path}: clip_l and clip_g have different vector counts")
        return vectors
    tensors = {key: value for key, value in data.items() if isinstance(value, torch.Tensor)}
    if len(tensors) == 1:
        key, value = next(iter(tensors.items()))
        return {"": as_matrix(value, key)}
    raise CheckpointFormatError(
        f"embedding file {path} is not a textual-inversion embedding: expected 'string_to_param', "
        f"'clip_l'+'clip_g' or a single tensor; found keys {sorted(map(str, data))[:10]}"
    )


def load_textual_inversion(path: str | Path, name: str | None = None) -> TextualInversion:
    """Load one embedding file; `name` defaults to the file name without its suffix."""
    from mixkit.io.hashing import sha256_file

    path = Path(path)
    if not path.is_file():
        raise ModelNotFoundError(f"embedding file {path} does not exist")
    data = _read_tensor_file(path)
    vectors = embedding_vectors_from_data(data, path)
    return TextualInversion(name=name or path.stem, path=path, vectors=vectors, sha256=sha256_file(path, use_cache=False),
                            **training_metadata(data))


def encoder_widths(text_encoders: list, is_sdxl: bool) -> list[tuple[str, int]]:
    """(embedding key, vector width) per text encoder: [("", 768)] for SD 1.x, [("clip_l", 768), ("clip_g", 1280)]
    for SDXL, [("clip_g", 1280)] for SDXL's refiner (`is_sdxl` and one encoder, OpenCLIP bigG); what
    `TextualInversion.vectors_for` checks an embedding against."""
    keys = (SDXL_KEYS if len(text_encoders) == len(SDXL_KEYS) else SDXL_KEYS[1:]) if is_sdxl else ("",)
    return [(key, encoder.get_input_embeddings().embedding_dim) for key, encoder in zip(keys, text_encoders)]


def fit_problem(embedding: TextualInversion, widths: list[tuple[str, int]]) -> str | None:
    """Why `embedding` cannot serve text encoders of `widths` (another model family), or None if it fits."""
    kind = "SDXL" if widths and widths[0][0] else "SD1/SD2"
    try:
        for key, width in widths:
            embedding.vectors_for(key, width, kind)
    except ValueError as error:
        return str(error)
    return None


class EmbeddingLibrary:
    """The embeddings of one folder (recursively), by file name; read on first use and cached.

    `names()` are the embeddings a prompt can use; files that cannot be read are left out of it and
    listed by `skipped()` with the reason, so a prompt word matching one stays plain text.
    """

    def __init__(self, folder: str | Path | None = None) -> None:
        self._paths: dict[str, Path] = {}
        self._loaded: dict[str, TextualInversion] = {}
        self._failed: dict[str, str] = {}  # name -> why its file could not be read
        self._stamps: dict[str, tuple[int, int]] = {}  # (mtime_ns, size) of each file when it was read
        self._found: dict[str, tuple[int, int] | None] = {}  # (mtime_ns, size) of each file when the folder was scanned
        self._folders: list[Path] = []
        if folder is not None:
            self.add_folder(folder)

    def refreshed(self) -> "EmbeddingLibrary":
        """The same folders scanned again (files added or removed since), keeping the embeddings already read from
        files that have not changed: the web UI lists the folder on every request and must not reread it all.
        Embeddings registered with `add` (not files of the folders) are not carried over."""
        fresh = EmbeddingLibrary()
        for folder in self._folders:
            fresh.add_folder(folder)
        for name in [*self._loaded, *self._failed]:
            path = fresh._paths.get(name)
            if path is not None and path == self._paths.get(name) and _stamp(path) == self._stamps.get(name):
                fresh._stamps[name] = self._stamps[name]
                if name in self._loaded:
                    fresh._loaded[name] = self._loaded[name]
                else:
                    fresh._failed[name] = self._failed[name]
        return fresh

    def signature(self) -> tuple:
        """What the folders held at the last scan: (name, path, (mtime_ns, size)) of every file found. Two scans with
        equal signatures give the same embeddings, so a caller can keep what it built from the older one."""
        return tuple((name, str(path), self._found.get(name)) for name, path in sorted(self._paths.items()))

    def add_folder(self, folder: str | Path) -> None:
        folder = Path(folder)
        if not folder.is_dir():
            raise ModelNotFoundError(f"embeddings folder {folder} does not exist or is not a folder")
        self._folders.append(folder)
        # .safetensors wins over a .pt of the same name: it is the safe, preferred format.
        for path in sorted(folder.rglob("*"), key=_folder_order):
            if path.suffix.lower() in EMBEDDING_SUFFIXES and path.is_file() and path.stem not in self._paths:
                self._paths[path.stem] = path
                self._found[path.stem] = _stamp(path)

    def add(self, embedding: TextualInversion) -> None:
        """Register an already loaded embedding (e.g. from training) under its name."""
        self._paths[embedding.name] = embedding.path
        self._loaded[embedding.name] = embedding
        self._failed.pop(embedding.name, None)

    def file_names(self) -> list[str]:
        """Every embedding file found, readable or not."""
        return sorted(self._paths)

    def names(self) -> list[str]:
        """The embeddings a prompt can use: every file that reads as an embedding (each is read once)."""
        return [name for name in self.file_names() if self._try_load(name)]

    def names_for(self, text_encoders: list, is_sdxl: bool) -> list[str]:
        """The usable embeddings that fit these text encoders; the others (another model family's) are skipped,
        so their names in a prompt stay plain text, as A1111 does."""
        widths = encoder_widths(text_encoders, is_sdxl)
        fitting = []
        for name in self.names():
            problem = fit_problem(self._loaded[name], widths)
            if problem is None:
                fitting.append(name)
            else:
                logger.debug("embedding %r skipped for this model: %s", name, problem)
        return fitting

    def skipped(self) -> dict[str, str]:
        """{name: reason} for the files that could not be read as embeddings (unsafe, corrupt, not an embedding)."""
        self.names()
        return {name: self._failed[name] for name in sorted(self._failed)}

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._paths and self._try_load(name)

    def get(self, name: str) -> TextualInversion:
        if name not in self._paths:
            from mixkit.errors import UnknownNameError

            raise UnknownNameError(f"Unknown embedding {name!r}. Valid names: {', '.join(self.names()) or '(none)'}.")
        if name not in self._loaded:
            self._failed.pop(name, None)
            self._stamps[name] = _stamp(self._paths[name])
            self._loaded[name] = load_textual_inversion(self._paths[name], name)
        return self._loaded[name]

    def _try_load(self, name: str) -> bool:
        """Read `name`'s file once; a failure is remembered (and logged once) until the file changes."""
        if name in self._loaded:
            return True
        if name in self._failed:
            return False
        try:
            self.get(name)
        except (OSError, ValueError) as error:  # mixkit's checkpoint errors subclass these
            self._failed[name] = str(error)
            logger.warning("embedding %r skipped (its name stays plain text in prompts): %s", name, error)
            return False
        return True


def _folder_order(path: Path) -> tuple[int, str]:
    suffix = path.suffix.lower()
    return (EMBEDDING_SUFFIXES.index(suffix) if suffix in EMBEDDING_SUFFIXES else 9, str(path))


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def ti_hashes_infotext(used: dict[str, str], *, bundled: bool = True) -> str:
    """A1111's `TI hashes` infotext value: "name: shorthash, name: shorthash" (sha256, 12 hex; a LoRA's name for
    vectors bundled in it, `TextualInversion.infotext_hash`).

    Names lose their ":" and "," (A1111's `sd_hijack_clip` forward does the same), which would otherwise make the
    list ambiguous to read back; so does a LoRA name written for a bundled word, which then reads as that LoRA's
    `Lora hashes` entry. Embeddings with no hash (made in memory, as training previews) are left out, and with
    `bundled=False` (A1111's `lora_bundled_ti_to_infotext` off) the words whose vectors a LoRA bundles.
    """
    return ", ".join(f"{_infotext_name(name)}: {_infotext_name(shorthash)}" for name, shorthash in used.items()
                     if shorthash and (bundled or not isinstance(shorthash, BundledInLora)))


def _infotext_name(name: str) -> str:
    return name.replace(":", "").replace(",", "")
