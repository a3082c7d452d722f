"""The UI task registry: a job outlives the page that started it, and only its own browser (task id, --auth user)
finds it again, with its result."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from webui.ui_tasks import TaskResult, UiTasks, check_task_id, new_task_id
from webui.worker import GenerationWorker

from .worker_jobs import submit_until_interrupted

ID_A, ID_B = "task(aaaaaaaaaaaaaaaa)", "task(bbbbbbbbbbbbbbbb)"


@pytest.fixture()
def worker():
    made = GenerationWorker(4)
    yield made
    made.close()


def result_of(outcome) -> TaskResult:
    """A stand-in for the gallery files: the job's return value names its one image."""
    return TaskResult([f"/gallery/{outcome}.png"], [1], [f"infotext of {outcome}"], image_count=1,
                      interrupted=outcome == "interrupted")


def test_each_task_id_finds_its_own_jobs_result_once_it_ends_without_any_page(worker):
    tasks = UiTasks(worker)
    release = threading.Event()
    job_a = worker.submit(lambda control, on_step: (release.wait(10), "a")[1], "txt2img", keep_on_disconnect=True)
    job_b = worker.submit(lambda control, on_step: "b", "txt2img", keep_on_disconnect=True)
    task_a = tasks.register(ID_A, "txt2img", job_a, None, result_of)
    task_b = tasks.register(ID_B, "txt2img", job_b, None, result_of)
    assert not task_a.done.is_set() and tasks.find(ID_A, None) is task_a
    release.set()  # nobody follows either task: the results are made when the jobs end
    assert task_b.done.wait(10) and task_a.done.wait(10)
    assert tasks.find(ID_A, None).result.paths == ["/gallery/a.png"]
    assert tasks.find(ID_B, None).result.infotexts == ["infotext of b"]
    assert tasks.find(ID_A, None) is task_a  # asked again (a second tab, a second reload): the same result


def test_another_users_unknown_or_malformed_ids_find_nothing(worker):
    tasks = UiTasks(worker)
    job, _ = submit_until_interrupted(worker)
    tasks.register(ID_A, "txt2img", job, "alice", result_of)
    assert tasks.find(ID_A, "alice") is not None
    assert tasks.find(ID_A, "bob") is None and tasks.find(ID_A, None) is None  # not given out to another user
    assert tasks.find(ID_B, "alice") is None and tasks.find("", "alice") is None and tasks.find(None, "alice") is None
    assert tasks.interrupt(ID_A, "bob") is False and tasks.skip(ID_A, "bob") is False
    assert not job.control.interrupted
    assert tasks.interrupt(ID_A, "alice") is True and job.future.result(10) == "interrupted"


def test_a_task_id_in_use_is_refused_so_no_page_takes_over_another_task(worker):
    tasks = UiTasks(worker)
    job, _ = submit_until_interrupted(worker)
    tasks.register(ID_A, "txt2img", job, None, result_of)
    other = worker.submit(lambda control, on_step: "other", "txt2img")
    with pytest.raises(ValueError, match=r"task id 'task\(aaaaaaaaaaaaaaaa\)' is already in use; reload the page"):
        tasks.register(ID_A, "txt2img", other, None, result_of)
    assert tasks.in_use(ID_A) and not tasks.in_use(ID_B)
    worker.interrupt_job(job)


@pytest.mark.parametrize("bad", ["", "short", "task(has space)", "x" * 129, "task(<script>)", 12345678, None])
def test_a_malformed_task_id_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match="task id must be 8 to 128 characters"):
        check_task_id(bad)


def test_new_task_ids_have_a1111s_form_and_differ():
    made = {new_task_id() for _ in range(100)}
    assert len(made) == 100 and all(check_task_id(made_id).startswith("task(") for made_id in made)


def test_interrupt_drops_a_waiting_task_and_skip_reaches_only_a_running_one(worker):
    tasks = UiTasks(worker)
    running, body = submit_until_interrupted(worker)
    waiting = worker.submit(lambda control, on_step: "never", "txt2img")
    tasks.register(ID_A, "txt2img", running, None, result_of)
    waiting_task = tasks.register(ID_B, "txt2img", waiting, None, result_of)
    assert tasks.skip(ID_B, None) is False and tasks.skip(ID_A, None) is True
    deadline = time.monotonic() + 10
    while not body.skips and time.monotonic() < deadline:  # the running job takes the skip at its next check
        time.sleep(0.01)
    assert tasks.interrupt(ID_B, None) is True and waiting_task.done.wait(10)
    assert waiting_task.cancelled and waiting_task.result is None
    assert tasks.interrupt(ID_A, None) is True
    assert tasks.find(ID_A, None).done.wait(10) and tasks.find(ID_A, None).result.interrupted
    assert body.skips == [True] and not waiting.control.take_skip()
    assert tasks.interrupt(ID_A, None) is False  # ended: nothing left to stop


def test_a_failed_job_is_recorded_and_logged_once(worker, caplog):
    tasks = UiTasks(worker)

    def broken(control, on_step):
        raise RuntimeError("the LoRA does not fit")

    with caplog.at_level(logging.ERROR, logger="webui.ui"):
        task = tasks.register(ID_A, "txt2img", worker.submit(broken, "txt2img"), None, result_of)
        assert task.done.wait(10)
    assert str(task.failure) == "the LoRA does not fit" and task.result is None
    assert [record.getMessage() for record in caplog.records] == ["UI job failed: Generation failed: the LoRA does "
                                                                  "not fit"]


def test_a_result_that_cannot_be_finished_is_the_tasks_failure(worker):
    def disk_full(outcome):
        raise OSError("No space left on device")

    task = UiTasks(worker).register(ID_A, "txt2img", worker.submit(lambda c, s: "made", "txt2img"), None, disk_full)
    assert task.done.wait(10) and isinstance(task.failure, OSError) and task.result is None


def test_finished_tasks_are_forgotten_beyond_the_newest_and_after_their_time(worker):
    now = [1000.0]
    tasks = UiTasks(worker, keep_finished=2, keep_seconds=60, clock=lambda: now[0])
    running, _ = submit_until_interrupted(worker, "other tab")
    tasks.register("task(running-one)", "txt2img", running, None, result_of)  # runs on while others would finish
    worker.interrupt_job(running)
    assert tasks.find("task(running-one)", None).done.wait(10)
    for number in range(3):
        now[0] += 1
        job = worker.submit(lambda control, on_step, n=number: f"job{n}", "txt2img")
        assert tasks.register(f"task(finished-{number})", "txt2img", job, None, result_of).done.wait(10)
    kept = [task_id for task_id in ("task(running-one)", "task(finished-0)", "task(finished-1)", "task(finished-2)")
            if tasks.find(task_id, None) is not None]
    assert kept == ["task(finished-1)", "task(finished-2)"]  # the two newest of four finished
    assert tasks.find("task(finished-2)", None).result.paths == ["/gallery/job2.png"]
    now[0] += 59
    assert tasks.find("task(finished-2)", None) is not None
    now[0] += 2  # 61 s after the last one finished
    assert tasks.find("task(finished-2)", None) is None and len(tasks) == 0


def test_a_running_task_is_never_forgotten(worker):
    now = [0.0]
    tasks = UiTasks(worker, keep_finished=1, keep_seconds=1, clock=lambda: now[0])
    running, _ = submit_until_interrupted(worker)
    tasks.register(ID_A, "txt2img", running, None, result_of)
    now[0] += 3600
    assert tasks.find(ID_A, None) is not None
    worker.interrupt_job(running)


@pytest.mark.parametrize("keep_finished, keep_seconds", [(0, 60), (True, 60), (2, 0)])
def test_the_registry_limits_are_checked(worker, keep_finished, keep_seconds):
    with pytest.raises(ValueError, match="keep_finished must be a positive integer|keep_seconds must be positive"):
        UiTasks(worker, keep_finished=keep_finished, keep_seconds=keep_seconds)


def test_a_finished_task_keeps_its_result_but_not_the_jobs_images(worker):
    # Results are kept for hours: the job's outcome (its images) and its function (the request's init images) are
    # let go once the gallery result is made; the job's control and bookkeeping stay.
    import gc
    import weakref

    from PIL import Image

    class Outcome:
        images = [Image.new("RGB", (8, 8))]

    made = Outcome()
    job = worker.submit(lambda control, on_step: made, "txt2img", session="tab", keep_on_disconnect=True)
    task = UiTasks(worker).register(ID_A, "txt2img", job, None, lambda outcome: result_of("made"))
    assert task.done.wait(10) and task.result.paths == ["/gallery/made.png"]
    outcome, made, job = weakref.ref(made), None, None
    gc.collect()
    assert outcome() is None  # nothing of the task holds the images any more
    assert task.job.function is None and task.job.session == "tab" and task.job.keep_on_disconnect
