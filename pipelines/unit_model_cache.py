"""How many ControlNet / IP-Adapter models a server keeps loaded between jobs, and which one goes first.

sd-webui-controlnet keeps its unit models in one cache whose size is the setting `control_net_model_cache_size`
(default 2, its slider 1..10); IP-Adapters are ControlNet models there, so they share it. Here the same: one
`UnitModelCache` holds a server's ControlNets, IP-Adapter weights and CLIP image encoders (each one place), at most
`size` of them, the least recently used evicted first. Two differences from the extension, both what its users ask
for: the extension drops the oldest *loaded* model (its OrderedDict is never reordered on a hit), here the least
recently *used*; and while a job runs (`in_job`) nothing is evicted to make room, the cache is trimmed when it ends.
Why: a job's models are looked up one after the other (its ControlNets, then each adapter's weights and encoder), so
evicting at each load throws out the model the same job asks for next. With size 2, a job with a ControlNet and an
IP-Adapter (three models) read all three again at every run that way; trimmed after the job, the next identical job
reads one. The job holds its models anyway while it runs; a size lowered meanwhile (`resize`) evicts at once the
models it has not used.

Size 0 keeps nothing between jobs (the extension's code skips caching at 0 too); `size=None` is unbounded (a
pipeline's own store in the Python API, which keeps what it loaded as diffusers does). Each entry may carry the
cross-attention width of the model family it is made for; `keep_family` drops the others when the checkpoint
switches (an SD 1.5 ControlNet cannot run with an SDXL checkpoint), entries without one (image encoders) stay.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Any, Callable, Hashable, Iterator

CACHE_SIZE_KEY = "control_net_model_cache_size"  # sd-webui-controlnet's option name
DEFAULT_CACHE_SIZE = 2  # the extension's default
MAX_CACHE_SIZE = 10  # the extension's slider maximum


def check_cache_size(value: Any) -> int:
    """`value` as a cache size: a whole number in [0, MAX_CACHE_SIZE]; ValueError naming it otherwise."""
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole or not 0 <= value <= MAX_CACHE_SIZE:
        raise ValueError(f"{CACHE_SIZE_KEY} must be a whole number in [0, {MAX_CACHE_SIZE}] (how many ControlNet / "
                         f"IP-Adapter models stay loaded between jobs; 0 keeps none), got {value!r}.")
    return int(value)


class UnitModelCache:
    """Loaded unit models by key (a file version, `pipelines.ip_adapter_store.file_version`), least recently used
    first. Thread-safe: request threads read shapes (which may keep a `.bin`'s weights) while the worker runs a job.

    Callers look up with `get`, load on a miss outside any lock (a large file takes a while) and `put` the result."""

    def __init__(self, size: int | None = DEFAULT_CACHE_SIZE) -> None:
        self._lock = threading.Lock()
        self._size = None if size is None else check_cache_size(size)
        self._entries: OrderedDict[Hashable, tuple[Any, int | None]] = OrderedDict()  # key -> (model, family width)
        self._jobs = 0  # jobs running now (`in_job`); while any runs, the models used are pinned
        self._pinned: set[Hashable] = set()

    @property
    def size(self) -> int | None:
        return self._size

    def resize(self, size: int) -> int:
        """Keep at most `size` models from now on (checked by `check_cache_size`); returns how many were evicted now
        (models pinned by the running job leave when it ends)."""
        size = check_cache_size(size)
        with self._lock:
            self._size = size
            return self._trim()

    def get(self, key: Hashable) -> Any:
        """The model kept under `key` (now the most recently used, and pinned while a job runs), or None."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
            if self._jobs:
                self._pinned.add(key)
            return found[0]

    def put(self, key: Hashable, model: Any, *, family_width: int | None = None) -> Any:
        """Keep `model` under `key` as the most recently used, evicting the least recently used models beyond the
        size (while a job runs: when it ends); returns `model` (kept or not: at size 0 it is only the caller's)."""
        with self._lock:
            self._entries[key] = (model, family_width)
            self._entries.move_to_end(key)
            if self._jobs:
                self._pinned.add(key)
            else:
                self._trim()
        return model

    def forget(self, which: Callable[[Hashable], bool]) -> int:
        """Drop every model whose key `which` accepts (another version of a replaced file, a store's release), pinned
        or not: the running job keeps its own references. Returns how many were dropped."""
        with self._lock:
            gone = [key for key in self._entries if which(key)]
            for key in gone:
                del self._entries[key]
                self._pinned.discard(key)
            return len(gone)

    def keep_family(self, width: int) -> int:
        """Drop the models made for another family than cross-attention width `width` (the checkpoint just loaded);
        models of no family (image encoders) stay. Returns how many were dropped."""
        with self._lock:
            stale = {key for key, (_, family) in self._entries.items() if family is not None and family != width}
        return self.forget(stale.__contains__)

    def clear(self) -> int:
        """Drop every model (unload-checkpoint); returns how many were held."""
        return self.forget(lambda key: True)

    @contextmanager
    def in_job(self) -> Iterator[None]:
        """Around a job: nothing is evicted to make room until it ends (`resize` evicts only the models it has not
        used), then the least recently used go down to the size."""
        with self._lock:
            self._jobs += 1
        try:
            yield
        finally:
            with self._lock:
                self._jobs -= 1
                if not self._jobs:
                    self._pinned.clear()
                    self._trim()

    def keys(self) -> list:
        """The keys held, least recently used first."""
        with self._lock:
            return list(self._entries)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def _trim(self) -> int:
        """Evict least recently used unpinned models down to the size (lock held); returns how many."""
        if self._size is None:
            return 0
        evicted = 0
        for key in list(self._entries):
            if len(self._entries) <= self._size:
                break
            if key not in self._pinned:
                del self._entries[key]
                evicted += 1
        return evicted
