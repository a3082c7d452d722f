"""One process-wide model cache, keyed by (kind, source, dtype, device), shared by every flow.

Two apps that name the same Stable Diffusion folder get the same loaded object, so an inpainting
chain and a text-to-image chain in one process hold one copy of the weights. `release` drops
entries (all, or one source) so the memory can be reclaimed.
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
from pathlib import Path
from typing import Any

from appflow.model_kinds import ModelKind


def normalize_source(source: str | os.PathLike) -> str:
    """Local paths as absolute paths (so './sd' and '/abs/sd' share an entry), shipped tiny names as their folder
    (so 'mixkit-tiny-sd' and its path share one too; a local folder of that name wins, as the loaders decide);
    hub ids unchanged."""
    from mixkit.io.sources import shipped_tiny_model

    path = Path(source).expanduser()
    if not path.exists():
        path = shipped_tiny_model(str(source)) or path
    return str(path.resolve()) if path.exists() else str(source)


@contextlib.contextmanager
def global_random_state_kept():
    """Give back torch's, numpy's and Python's global random states after a load.

    Loaders initialise weights a checkpoint lacks (and some models draw at construction) from the global
    generators, so whether a model was already cached changed every random number the caller drew afterwards
    (`torch.manual_seed(0); Appflow(...); torch.rand(1)` gave another value on the second call)."""
    import random

    import numpy as np
    import torch

    python_state, numpy_state = random.getstate(), np.random.get_state()
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            random.setstate(python_state)
            np.random.set_state(numpy_state)


class ModelCache:
    """Loaded models by key; `loads` counts real loads (for tests and monitoring)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str, str, str], Any] = {}
        self._lock = threading.RLock()  # guards `_entries`; held only to look up or store, never during a load
        # Loads run one at a time: two at once would interleave their fork/restore of the global random states
        # (`global_random_state_kept`) and hold two models' worth of load-time memory.
        self._load_lock = threading.RLock()
        self.loads = 0

    @staticmethod
    def key(kind: ModelKind, source: str | os.PathLike, device: str, dtype: Any) -> tuple[str, str, str, str]:
        return kind.name, normalize_source(source), str(dtype), str(device)

    def get(self, kind: ModelKind, source: str | os.PathLike, device: str, dtype: Any) -> Any:
        """The loaded model, loaded now if no thread has yet; a cached model never waits for another one's load."""
        key = self.key(kind, source, device, dtype)
        with self._lock:
            if key in self._entries:
                return self._entries[key]
        with self._load_lock:
            with self._lock:  # loaded by the thread this one waited for: one load per key
                if key in self._entries:
                    return self._entries[key]
            with global_random_state_kept():
                model = kind.load(str(source), device, dtype)
            with self._lock:
                self._entries[key] = model
                self.loads += 1
            return model

    def __contains__(self, key: tuple) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def release(self, source: str | os.PathLike | None = None) -> int:
        """Drop every entry (or those loaded from `source`); returns how many were dropped."""
        with self._lock:
            wanted = None if source is None else normalize_source(source)
            doomed = [key for key in self._entries if wanted is None or key[1] == wanted]
            for key in doomed:
                del self._entries[key]
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:  # pragma: no cover
            pass
        return len(doomed)


MODEL_CACHE = ModelCache()


def release_models(source: str | os.PathLike | None = None) -> int:
    """Release models from the process-wide cache (all, or one source)."""
    return MODEL_CACHE.release(source)
