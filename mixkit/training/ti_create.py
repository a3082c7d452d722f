"""A new, untrained embedding file made from a loaded model's token vectors: A1111's "Create embedding".

A1111 trains an embedding in two steps: "Create embedding" writes `<name>.pt` at step 0 (the initialization text's
token vectors, or zeros), and "Train" continues that file. Writing the start as a file of the embeddings folder
means the untrained word is already usable in prompts, and a training run can start from it (`weights`) on any
server or with `mixkit train ti`.
"""

from __future__ import annotations

from pathlib import Path

from mixkit.prompts.chunking import CHUNK_TOKENS
from mixkit.prompts.limits import check_prompt_text
from mixkit.training.ti_config import EMBEDDING_SUFFIXES

# The characters A1111 keeps in a new embedding's name (it drops the others silently; mixkit refuses them).
NAME_PUNCTUATION = "._- "
# File systems allow 255 bytes per name; the embedding file (`<name>.pt`), its atomic temporary
# (`.<name>.pt.XXXXXXXX.tmp`) and a training run's copies (`<name>-<step>.pt`) must all fit.
MAX_NAME_BYTES = 200


def check_embedding_name(name: object) -> str:
    """`name` if it can name an embedding file of a folder; a ValueError otherwise. Only A1111's characters (letters,
    digits, `._- `) are allowed, so a name can never leave the folder (`../x`, `a/b`) nor be a hidden file."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"the embedding name must be a non-empty word like 'sks_dog', got {name!r}")
    bad = sorted({c for c in name if not (c.isalnum() or c in NAME_PUNCTUATION)})
    if bad:
        raise ValueError(f"the embedding name {name!r} holds {''.join(bad)!r}; use only letters, digits and "
                         f"{NAME_PUNCTUATION.strip()!r} or spaces (it becomes the file name and the prompt word)")
    size = len(name.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        raise ValueError(f"the embedding name {name[:20]!r}... is {size} bytes long; use at most {MAX_NAME_BYTES} "
                         "(it becomes a file name)")
    if name != name.strip() or name.startswith("."):
        raise ValueError(f"the embedding name {name!r} must not start with a dot or start or end with a space")
    return name


def embedding_files(folder: str | Path, name: str) -> list[Path]:
    """The files of `folder` (subfolders too, as `EmbeddingLibrary` reads it) that a prompt would know as `name`."""
    return sorted(path for path in Path(folder).rglob("*")
                  if path.stem == name and path.suffix.lower() in EMBEDDING_SUFFIXES and path.is_file())


def create_embedding(model, folder: str | Path, name: str, *, num_vectors_per_token: int = 1, init_text: str = "*",
                     overwrite_old: bool = False, checkpoint_name: str | None = None) -> Path:
    """Write `<folder>/<name>.pt` (A1111's format, step 0) holding `num_vectors_per_token` vectors taken from
    `model`'s input vectors of `init_text`'s tokens as A1111 picks them (empty text: zero vectors); returns the path.

    An existing embedding of that name is refused unless `overwrite_old`, which then replaces that file, in its own
    format. `model` (a loaded `DiffusionModel`) is only read.
    """
    from mixkit.prompts.embeddings import encoder_widths
    from mixkit.training.ti_export import save_embedding
    from mixkit.training.ti_vectors import initial_vectors

    # 1. Check every input before anything is written.
    check_embedding_name(name)
    if isinstance(num_vectors_per_token, bool) or not isinstance(num_vectors_per_token, int) or \
            not 1 <= num_vectors_per_token <= CHUNK_TOKENS:
        raise ValueError(f"num_vectors_per_token must be a whole number in 1..{CHUNK_TOKENS} (one prompt chunk), got "
                         f"{num_vectors_per_token!r}")
    if not isinstance(init_text, str):
        raise TypeError(f"init_text must be a string ('' for zero vectors), got {type(init_text).__name__}")
    check_prompt_text(init_text, what="init_text")  # a lone surrogate made the tokenizer's own riddle the message
    if not isinstance(overwrite_old, bool):
        raise TypeError(f"overwrite_old must be true or false, got {overwrite_old!r}")
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"embeddings folder {str(folder)!r} does not exist; create it or start the server with "
                         "--embeddings-dir pointing at one")
    existing = embedding_files(folder, name)
    if existing and not overwrite_old:
        raise ValueError(f"embedding {name!r} already exists ({', '.join(p.name for p in existing)}); choose another "
                         "name, or set overwrite_old (the Train tab's \"Overwrite Old Embedding\") to replace it")
    if len(existing) > 1:
        raise ValueError(f"several files are named {name!r} ({', '.join(p.name for p in existing)}); remove all but "
                         "the one to replace")
    target = existing[0] if existing else folder / f"{name}.pt"

    # 2. The vectors, from the model's token table (A1111's spacing over the text's tokens).
    vectors = initial_vectors(model.text_encoders, model.tokenizers, num_vectors_per_token, init_text or None,
                              spread=True)
    keys = [key or "emb_params" for key, _ in encoder_widths(model.text_encoders, model.family.uses_pooled_text)]

    # 3. Written atomically: a reader sees the old file or the new one.
    return save_embedding(dict(zip(keys, vectors)), target, metadata={}, name=name, step=0,
                          checkpoint_name=checkpoint_name or getattr(model, "name", None) or "")
