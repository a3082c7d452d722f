"""Ctrl-C as A1111's Interrupt for command-line runs: the first stops after the current step, the second aborts.

One implementation for every command that generates (the `mixkit` generation commands in webui.cli and AppFlow's
`apps run`, which cannot import webui), so both behave and word it alike."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

from pipelines.control import GenerationControl


@contextlib.contextmanager
def interrupt_on_sigint(control: GenerationControl):
    """While inside, the first Ctrl-C interrupts `control` (the run stops after its current sampling step and keeps
    what was made, as A1111's Interrupt saves the finished images); a second raises KeyboardInterrupt at once, saving
    nothing. The caller's SIGINT handler is put back on leaving. Off the main thread (which alone receives signals)
    this does nothing."""
    def on_sigint(signum, frame) -> None:
        if control.interrupted:
            raise KeyboardInterrupt
        control.interrupt()
        print("\nmixkit: interrupting after this step; Ctrl-C again to abort without saving", file=sys.stderr)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
