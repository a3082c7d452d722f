"""The generation worker: one job at a time, a bounded queue, cancel/interrupt, progress and ETA."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from pipelines.control import StepProgress
from webui.worker import GenerationWorker, QueueFullError, estimate_eta

from .worker_jobs import submit_until_interrupted


def blocking_job(release: threading.Event, log: list, name: str):
    def run(control, on_step):
        log.append(f"start {name}")
        release.wait(10)
        log.append(f"end {name}")
        return name
    return run


@pytest.fixture()
def worker():
    made = GenerationWorker(2, preview_every=2)
    yield made
    made.close()


def wait_until(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_jobs_run_one_at_a_time_in_order(worker):
    release, log = threading.Event(), []
    jobs = [worker.submit(blocking_job(release, log, str(i)), "job") for i in range(3)]
    wait_until(lambda: log == ["start 0"])
    assert worker.queued == 2
    release.set()
    assert [job.future.result(10) for job in jobs] == ["0", "1", "2"]
    assert log == ["start 0", "end 0", "start 1", "end 1", "start 2", "end 2"]


def test_queue_full_is_refused_with_a_clear_message(worker):
    release, log = threading.Event(), []
    first = worker.submit(blocking_job(release, log, "running"), "job")
    wait_until(lambda: log == ["start running"])
    waiting = [worker.submit(blocking_job(release, log, f"w{i}"), "job") for i in range(2)]
    with pytest.raises(QueueFullError, match=r"Queue full: 2 job\(s\) are waiting \(the limit is 2\)"):
        worker.submit(blocking_job(release, log, "extra"), "job")
    release.set()
    for job in [first, *waiting]:
        job.future.result(10)
    worker.submit(lambda control, on_step: "after", "job").future.result(10)  # room again


def test_cancel_drops_a_waiting_job_and_interrupts_a_running_one(worker):
    running, _ = submit_until_interrupted(worker, "job")
    waiting = worker.submit(lambda control, on_step: "never", "job")
    worker.cancel(waiting)
    assert waiting.future.cancelled() and worker.queued == 0
    worker.cancel(running)
    assert running.future.result(10) == "interrupted"


def test_interrupt_and_skip_report_whether_something_ran(worker):
    assert worker.interrupt() is False and worker.skip() is False
    started = threading.Event()

    def job(control, on_step):
        started.set()
        while not control.take_skip():
            time.sleep(0.01)
        while not control.interrupted:
            time.sleep(0.01)
        return "done"

    submitted = worker.submit(job, "job")
    started.wait(10)
    assert worker.skip() is True and worker.progress().skipped
    assert worker.interrupt() is True and worker.progress().interrupted
    assert submitted.future.result(10) == "done"


def test_a_failing_job_raises_for_its_caller_and_the_worker_goes_on(worker):
    def broken(control, on_step):
        raise ValueError("bad LoRA")

    with pytest.raises(ValueError, match="bad LoRA"):
        worker.submit(broken, "job").future.result(10)
    assert worker.submit(lambda control, on_step: 5, "job").future.result(10) == 5
    assert not worker.progress().busy


def test_progress_tracks_steps_and_keeps_previews_every_n_steps(worker):
    gate, seen = threading.Event(), threading.Event()

    def job(control, on_step):
        for step in (1, 2, 3):
            on_step(StepProgress(step, 4, 0, 2, torch.full((1, 4, 2, 2), float(step)), control))
        seen.set()
        gate.wait(10)

    submitted = worker.submit(job, "txt2img")
    seen.wait(10)
    snapshot = worker.progress()
    assert (snapshot.job, snapshot.step, snapshot.total_steps, snapshot.batch_count) == ("txt2img", 3, 4, 2)
    assert snapshot.fraction == pytest.approx(3 / 8)
    assert snapshot.preview_latents[0, 0, 0, 0].item() == 2.0  # previews at steps 2, 4, ... (every 2)
    gate.set()
    submitted.future.result(10)
    assert worker.progress().step == 0 and not worker.progress().busy


def test_estimate_eta():
    assert estimate_eta(10.0, 0.25) == pytest.approx(30.0)
    assert estimate_eta(5.0, 0.0) == 0.0
    assert estimate_eta(5.0, 1.0) == 0.0


@pytest.mark.parametrize("bad", [-1, 1.5, True, "8", 10_001])
def test_queue_size_is_validated(bad):
    with pytest.raises(ValueError, match="max_queued"):
        GenerationWorker(bad)


def test_ending_a_session_cancels_only_that_sessions_jobs():
    worker = GenerationWorker(4)
    try:
        gate = threading.Event()
        running, _ = submit_until_interrupted(worker, session="tab-a")
        mine = worker.submit(lambda control, on_step: "never", "txt2img", session="tab-a")
        other = worker.submit(lambda control, on_step: (gate.wait(10), "other")[1], "txt2img", session="tab-b")
        api = worker.submit(lambda control, on_step: "api", "txt2img")
        assert worker.cancel_session("tab-c") == 0 and worker.cancel_session("") == 0
        assert worker.cancel_session("tab-a") == 2
        assert mine.future.cancelled() and running.future.result(10) == "interrupted"
        gate.set()
        assert other.future.result(10) == "other" and api.future.result(10) == "api"
        wait_until(lambda: not worker.progress().busy)
        assert worker.cancel_session("tab-a") == 0  # nothing of it is left
    finally:
        worker.close()


def test_a_session_whose_job_is_waiting_frees_its_queue_place():
    worker = GenerationWorker(1)
    try:
        release = threading.Event()
        first = worker.submit(blocking_job(release, [], "first"), "job", session="tab-b")
        worker.submit(lambda control, on_step: "queued", "job", session="tab-a")
        with pytest.raises(QueueFullError):
            worker.submit(lambda control, on_step: "late", "job", session="tab-c")
        worker.cancel_session("tab-a")
        late = worker.submit(lambda control, on_step: "late", "job", session="tab-c")  # room again
        release.set()
        assert first.future.result(10) == "first" and late.future.result(10) == "late"
    finally:
        worker.close()


def test_a_waiting_job_counts_the_jobs_ahead_of_it_not_itself(worker):
    from types import SimpleNamespace

    from webui.ui.progress_view import status_text

    release, log = threading.Event(), []
    first = worker.submit(blocking_job(release, log, "running"), "job")
    wait_until(lambda: log == ["start running"])
    second = worker.submit(blocking_job(release, log, "second"), "job")
    third = worker.submit(blocking_job(release, log, "third"), "job")
    assert (worker.jobs_ahead(first), worker.jobs_ahead(second), worker.jobs_ahead(third)) == (None, 1, 2)
    state = SimpleNamespace(worker=worker)
    assert status_text(state, third) == (0.0, "Waiting in queue (2 job(s) ahead)")
    release.set()
    for job in (first, second, third):
        job.future.result(10)
    assert worker.jobs_ahead(third) is None


def test_progress_keeps_a1111s_job_no_and_job_count_and_a_hires_jobs_fraction(worker):
    """A1111's state.job_no / job_count: the batch within the job (job_count = n_iter, process_images_inner), and in
    a hires fix the pass (job_count doubled in StableDiffusionProcessingTxt2Img.init, nextjob() before each
    sample_hr_pass), never the server's job number."""
    from pipelines.hires_progress import HiresStepProgress

    gate, seen = threading.Event(), threading.Event()
    snapshots = []

    def job(control, on_step):
        on_step(StepProgress(2, 4, 1, 3, torch.zeros(1, 4, 2, 2), control))
        snapshots.append(worker.progress())
        # batch 2's hires pass (pass 4 of 6), step 1 of 2, after 3 + 2 + 3 steps of a (3 + 2) x 3 job
        on_step(HiresStepProgress(1, 2, 1, 3, torch.zeros(1, 4, 2, 2), control, steps_before=8, steps_after=5,
                                  pass_index=3, pass_count=6))
        snapshots.append(worker.progress())
        seen.set()
        gate.wait(10)

    submitted = worker.submit(job, "txt2img")
    seen.wait(10)
    plain, hires = snapshots
    assert (plain.pass_index, plain.pass_count) == (1, 3)
    assert (hires.pass_index, hires.pass_count, hires.batch_index, hires.step) == (3, 6, 1, 1)
    assert hires.fraction == pytest.approx(9 / 15)
    gate.set()
    submitted.future.result(10)


def test_job_timestamp_is_set_once_when_a_job_starts_and_kept_while_idle(worker):
    # A1111's state.begin() sets job_timestamp once per job; /progress repeats it during and after the job.
    assert worker.progress().job_timestamp == "0"  # A1111's value before any job
    started, gate = threading.Event(), threading.Event()

    def job(control, on_step):
        started.set()
        gate.wait(10)

    submitted = worker.submit(job, "txt2img")
    started.wait(10)
    first = worker.progress().job_timestamp
    time.sleep(1.1)  # the timestamp has one-second resolution: a clock read per call would differ now
    assert worker.progress().job_timestamp == first == submitted.timestamp
    assert len(first) == 14 and first.isdigit()
    gate.set()
    submitted.future.result(10)
    time.sleep(1.1)
    assert worker.progress().job_timestamp == first


def test_a_session_ending_spares_the_jobs_kept_on_disconnect():
    # A reload ends the page's Gradio session; its txt2img/img2img generations go on for the reloaded page to
    # reattach to (`webui.ui_tasks`), while its other jobs (Extras, AppFlow) are dropped as before.
    worker = GenerationWorker(4)
    try:
        kept_running, _ = submit_until_interrupted(worker, session="tab-a", keep_on_disconnect=True)
        kept_waiting = worker.submit(lambda control, on_step: "kept", "txt2img", session="tab-a",
                                     keep_on_disconnect=True)
        extras = worker.submit(lambda control, on_step: "extras", "extras", session="tab-a")
        assert worker.end_session("tab-a") == 1 and extras.future.cancelled()
        assert not kept_running.control.interrupted and not kept_waiting.future.done()
        assert worker.cancel_session("tab-a") == 2  # the page's own Interrupt still reaches both
        assert kept_waiting.future.cancelled() and kept_running.future.result(10) == "interrupted"
    finally:
        worker.close()


def test_a_job_is_interrupted_or_skipped_by_itself_whatever_its_session(worker):
    running, body = submit_until_interrupted(worker, session="tab-a")
    waiting = worker.submit(lambda control, on_step: "waiting", "txt2img", session="tab-a")
    assert worker.waiting_position(waiting) == (1, 1) and worker.waiting_position(running) is None
    assert worker.skip_job(waiting) is False and not waiting.control.take_skip()  # a waiting job is not skipped
    assert worker.skip_job(running) is True
    wait_until(lambda: body.skips == [True])
    assert worker.progress().skipped
    assert worker.interrupt_job(waiting) is True and waiting.future.cancelled()
    assert worker.interrupt_job(running) is True and running.future.result(10) == "interrupted"
    assert worker.interrupt_job(running) is False and worker.skip_job(running) is False  # it has ended


def test_each_new_preview_gets_a_new_id_across_jobs(worker):
    seen = []

    def two_steps(control, on_step):
        for step in (1, 2):
            on_step(StepProgress(step, 2, 0, 1, torch.zeros(1, 4, 2, 2), control))
            seen.append(worker.progress().preview_id)
        return "done"

    assert worker.progress().preview_id == 0
    worker.submit(two_steps, "job").future.result(10)
    worker.submit(two_steps, "job").future.result(10)
    # preview_every=2: a preview at step 2 of each job, numbered on (a new job starts without one: 0)
    assert seen == [0, 1, 0, 2]
