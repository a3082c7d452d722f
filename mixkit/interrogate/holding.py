"""`HeldBetweenUses`: an interrogation model that is dropped after each use unless kept in memory, or while a batch
holds it.

A1111's `interrogate_keep_models_in_memory` off means "free the model after each interrogation"; A1111 frees it by
moving it to the CPU, so its next use costs a copy, not a reload. mixkit drops it (on a CPU server that is what frees
memory), so a job tagging many pictures (the Extras tab's Caption over a batch, Loopback's interrogation at every loop)
would read the file again for each picture. Such a job wraps its pictures in `held()`: the model loads at the first
use, stays loaded for the rest of the job, and is dropped when the job ends unless the last use asked to keep it.
"""

from __future__ import annotations

import contextlib
import threading


class HeldBetweenUses:
    """Mixin for a model loaded on first use: `_lock` guards the model, `_drop()` forgets it (under `_lock`), and each
    use ends with `_after_use(keep)` (under `_lock`)."""

    def _init_holds(self) -> None:
        self._lock = threading.Lock()
        self._holds = 0
        self._keep_after_use = False

    def _drop(self) -> None:
        raise NotImplementedError

    def _after_use(self, keep: bool) -> None:
        """Drop the model after a use that does not keep it, unless a `held()` block is open."""
        self._keep_after_use = keep
        if not keep and not self._holds:
            self._drop()

    def release(self) -> None:
        """Free the model as soon as nothing uses it, whatever the last use asked: now when idle, else when the running
        use ends (this waits for it) or the open `held()` blocks end. For keep-in-memory turned off: without this the
        model a kept use left loaded would stay until its next use, which may never come."""
        with self._lock:
            self._keep_after_use = False
            if not self._holds:
                self._drop()

    @contextlib.contextmanager
    def held(self):
        """Keep the model loaded between uses until the block ends (blocks nest, and may run in several threads);
        then it is dropped unless the last use asked to keep it. Holding loads nothing by itself."""
        with self._lock:
            self._holds += 1
        try:
            yield self
        finally:
            with self._lock:
                self._holds -= 1
                if not self._holds and not self._keep_after_use:
                    self._drop()
