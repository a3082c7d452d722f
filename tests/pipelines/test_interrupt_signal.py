"""`pipelines.interrupt_signal`: Ctrl-C as Interrupt for the CLI's generation commands and AppFlow's `apps run`."""

from __future__ import annotations

import signal
import threading

import pytest

from pipelines.control import GenerationControl
from pipelines.interrupt_signal import interrupt_on_sigint


def _ctrl_c() -> None:
    # What Python runs on a terminal's Ctrl-C: the installed handler. Called directly, as tests/webui/test_cli_generate
    # does: a real SIGINT to the whole pytest process reaches whichever thread earlier tests left running.
    signal.getsignal(signal.SIGINT)(signal.SIGINT, None)


def test_the_first_ctrl_c_interrupts_the_second_aborts_and_the_callers_handler_comes_back(capsys):
    control = GenerationControl()
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with interrupt_on_sigint(control):
            _ctrl_c()
            assert control.interrupted
            assert capsys.readouterr().err == ("\nmixkit: interrupting after this step; Ctrl-C again to abort without "
                                               "saving\n")
            _ctrl_c()
    assert signal.getsignal(signal.SIGINT) is before


def test_off_the_main_thread_it_leaves_signals_alone():
    """Only the main thread may set a signal handler (a server's worker thread runs jobs): there it does nothing."""
    before, seen = signal.getsignal(signal.SIGINT), []

    def run() -> None:
        with interrupt_on_sigint(GenerationControl()):
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [before]
