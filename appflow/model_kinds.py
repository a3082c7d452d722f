"""Model kinds: how AppFlow checks that a model source fits a role, and how it loads one.

Checking reads only `config.json` / `model_index.json`, so a wrong model ("a SAM checkpoint where a
detector is expected") is reported when the flow is built, before any weights load. Loaders use
the libraries' public `from_pretrained` paths, exactly as a user would.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from mixkit.errors import ModelNotFoundError
from mixkit.io.sources import shipped_tiny_model
from mixkit.registry import Registry


@dataclass(frozen=True)
class ModelKind:
    """A kind of model a task role accepts."""

    name: str
    description: str
    # transformers `model_type`s or diffusers `_class_name`s that fit, or a function returning them
    # (so listing apps does not import transformers' large auto-mappings)
    model_types: tuple[str, ...] | Callable[[], tuple[str, ...]]
    load: Callable[[str, str, Any], Any]  # (source, device, dtype) -> loaded object
    accepts: Callable[[Any], bool] = lambda obj: False  # already-loaded objects passed instead of a source
    # how to pass an already-loaded model of this kind that `accepts` refuses as it is (a bare transformers model)
    object_hint: str = ""


MODEL_KINDS: Registry[ModelKind] = Registry("AppFlow model kind")


def register_model_kind(kind: ModelKind) -> ModelKind:
    return MODEL_KINDS.register(kind.name, kind)


def local_config(source: str) -> tuple[str, dict] | None:
    """(file name, parsed JSON) of a source's config, or None when it is a hub id not cached locally."""
    path = Path(source).expanduser()
    if not path.exists():
        # A shipped mixkit-tiny name stands for its folder inside the package, exactly as the loaders resolve
        # it (`mixkit.io.sources.resolve_model_source`), so its role is checked like any folder's; a local
        # path of the same name still wins, as it does there.
        path = shipped_tiny_model(str(source)) or path
        if not path.exists():
            _refuse_misspelt_shipped_name(str(source))
    if path.is_file():
        return None  # single-file checkpoints carry no config; the loader checks them
    if path.is_dir():
        for name in ("model_index.json", "config.json"):
            if (path / name).is_file():
                return name, _read_json(path / name)
        raise ModelNotFoundError(f"Model folder {str(path)!r} has neither model_index.json nor config.json; "
                                 "pass a folder saved with save_pretrained, a single checkpoint file or a hub id.")
    if str(source).startswith((".", "/", "~")) or str(source).count("/") > 1:
        raise ModelNotFoundError(f"Model path {source!r} does not exist; check the path.")
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - huggingface_hub ships with transformers
        return None
    cache_dir = os.environ.get("HF_HUB_CACHE") or None  # read per call, as mixkit.io.sources and appflow.hub do
    for name in ("model_index.json", "config.json"):
        try:
            cached = try_to_load_from_cache(str(source), name, cache_dir=cache_dir)
        except ValueError:  # huggingface_hub's HFValidationError: not shaped like a repo id
            raise ModelNotFoundError(f"Model {source!r} is neither an existing path nor a Hugging Face id "
                                     "('org/name'); check the spelling.") from None
        if isinstance(cached, str):
            return name, _read_json(Path(cached))
    return None


def _refuse_misspelt_shipped_name(source: str) -> None:
    """A bare name that looks like a shipped mixkit-tiny model but is none, refused now with the closest one.

    Without this, "mixkit-tiny-xx" passes as a possible hub id and fails only when the first call loads it."""
    import difflib

    from mixkit.tiny.shipped import SHIPPED_MODELS

    if "/" in source or "\\" in source:
        return
    names = SHIPPED_MODELS.names()
    close = difflib.get_close_matches(source, names, n=1, cutoff=0.8)
    if not close and not source.lower().startswith("mixkit-tiny"):
        return
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ModelNotFoundError(f"Model {source!r} is neither a local path nor a shipped tiny model.{hint} Shipped: "
                             f"{', '.join(repr(n) for n in names)}; a Hugging Face id has the form 'org/name'.")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ModelNotFoundError(f"{str(path)!r} is not a readable JSON config ({error}); re-download the model.") from None


def config_identity(name: str, config: dict) -> str:
    """What a config says the model is: diffusers' `_class_name` or transformers' `model_type`."""
    if name == "model_index.json":
        return str(config.get("_class_name", "a diffusers pipeline"))
    return str(config.get("model_type") or config.get("_class_name") or "unknown")


def check_fit(kind: ModelKind, source: Any, where: str) -> None:
    """Raise ValueError if `source` is clearly not a `kind` model; pass when that cannot be told yet."""
    if not isinstance(source, (str, os.PathLike)):
        if kind.accepts(source):
            return
        raise TypeError(f"{where} needs {kind.description}: a hub id, a local folder or file, "
                        f"or a loaded object of that kind; got {_describe_object(source, kind)}.")
    if not str(source).strip():
        raise ValueError(f"{where} needs {kind.description}; got an empty model source.")
    found = local_config(str(source))
    if found is None:
        return
    identity = config_identity(*found)
    accepted = kind.model_types() if callable(kind.model_types) else kind.model_types
    if identity in accepted:
        return
    listed = ", ".join(sorted(accepted)[:12]) + (" ..." if len(accepted) > 12 else "")
    raise ValueError(
        f"{where} needs {kind.description}, but {str(source)!r} is a {identity!r} model "
        f"(from its {found[0]}); accepted: {listed}. Pass a matching model in `models=`."
    )


def _describe_object(obj: Any, kind: ModelKind) -> str:
    """What a refused model object is, and, for a transformers model of a type the role takes, how to pass it."""
    inner = getattr(obj, "model", None) if hasattr(obj, "processor") else None
    model = inner if inner is not None else obj
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    text = type(obj).__name__
    if inner is not None:
        text += f" of {type(inner).__name__} with {type(obj.processor).__name__}"
    if not model_type:
        return text
    text += f" (a {model_type!r} model)"
    accepted = kind.model_types() if callable(kind.model_types) else kind.model_types
    if model_type not in accepted:
        return text + f"; this role takes {', '.join(sorted(accepted)[:12])}{' ...' if len(accepted) > 12 else ''}"
    return text + (f"; {kind.object_hint}" if kind.object_hint else "")
