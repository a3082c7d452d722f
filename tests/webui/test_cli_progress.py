"""`webui.cli.progress`: how the generating commands run a job (progress, Ctrl-C as Interrupt) and report it."""

from __future__ import annotations

import signal
from types import SimpleNamespace

from pipelines.control import GenerationControl
from webui.cli.progress import report_written, run_with_progress, steps_done


def test_report_prints_the_paths_and_says_what_an_interrupted_job_kept(capsys):
    assert report_written(["a.png", "b.png"], False, "kept 2 of 4 image(s)") == 0
    out = capsys.readouterr()
    assert out.out == "a.png\nb.png\n" and out.err == ""
    assert report_written(["a.png"], True, "kept 1 of 4 image(s)") == 130
    out = capsys.readouterr()
    assert out.out == "a.png\n" and out.err == "mixkit: interrupted; kept 1 of 4 image(s)\n"


def test_the_job_gets_a_step_callback_and_an_interrupt_control_and_its_result_is_returned(capsys):
    seen = {}

    def job(*, callback, control):
        seen["control"] = control
        seen["handler"] = signal.getsignal(signal.SIGINT)
        callback(SimpleNamespace(batch_index=1, total_steps=3, step=2, batch_count=2))
        return "done"

    before = signal.getsignal(signal.SIGINT)
    assert run_with_progress(job, 6) == "done"
    assert isinstance(seen["control"], GenerationControl) and seen["handler"] is not before
    assert signal.getsignal(signal.SIGINT) is before  # the caller's handler again
    assert "5/6" in capsys.readouterr().err  # the bar shows the job's own count: batch 2, step 2 of 3


def test_steps_done_counts_every_pass_of_a_hires_job():
    assert steps_done(SimpleNamespace(batch_index=1, total_steps=3, step=2, batch_count=2)) == (5, 6)
    assert steps_done(SimpleNamespace(steps_before=4, step=1, total_steps=2, steps_after=3)) == (5, 9)
