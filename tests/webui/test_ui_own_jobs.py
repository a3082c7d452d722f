"""Interrupt and Skip act on the caller's own job only: cancel it while queued, stop it while running.

A1111's Interrupt/Skip set a global flag (`shared.state.interrupt()`), which is right for its single user;
here one queue serves every browser tab (and `--listen --auth` users), so a button must not stop another
session's job. Driven through the built Blocks' own click handlers.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from .ui_blocks import handler, model_less_ui
from .worker_jobs import submit_until_interrupted


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    with model_less_ui(tmp_path_factory.mktemp("ui-own-jobs")) as built_ui:
        yield built_ui


def click(blocks, elem_id: str, session: str) -> None:
    handler(blocks, elem_id, "click").fn(SimpleNamespace(session_hash=session))


def running_job(state, session: str):
    """A job of `session` that runs until interrupted, and the list of the skips it saw."""
    job, body = submit_until_interrupted(state.worker, session=session)
    return job, body.skips


def wait_until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(condition())


@pytest.mark.parametrize("kind", ["txt2img", "img2img"])
def test_interrupt_cancels_the_callers_queued_job_and_leaves_the_running_one(built, kind):
    state, blocks = built
    job_a, _ = running_job(state, "tab-A")
    job_b = state.worker.submit(lambda control, on_step: "ran", "txt2img", session="tab-B")
    click(blocks, f"{kind}_interrupt", "tab-B")
    assert job_b.future.cancelled()
    assert not job_a.control.interrupted and not job_a.future.done()
    click(blocks, f"{kind}_interrupt", "tab-A")
    assert job_a.future.result(10) == "interrupted"


def test_skip_acts_only_on_the_callers_running_job(built):
    state, blocks = built
    job_a, skips = running_job(state, "tab-A")
    job_b = state.worker.submit(lambda control, on_step: "ran", "txt2img", session="tab-B")
    click(blocks, "txt2img_skip", "tab-B")  # B's job only waits: A1111 clears skip when a job starts, so nothing
    assert not wait_until(lambda: skips, 0.3) and not job_b.future.cancelled()
    click(blocks, "txt2img_skip", "tab-A")
    assert wait_until(lambda: skips, 10) and skips == [True] and not job_b.future.done()
    click(blocks, "txt2img_interrupt", "tab-A")
    assert job_a.future.result(10) == "interrupted" and job_b.future.result(10) == "ran"


def test_a_button_without_a_session_touches_nothing(built):
    state, blocks = built
    job_a, _ = running_job(state, "tab-A")
    click(blocks, "txt2img_interrupt", None)
    click(blocks, "txt2img_skip", None)
    assert not job_a.control.interrupted
    state.worker.cancel(job_a)
    assert job_a.future.result(10) == "interrupted"


def test_the_interrupted_queued_job_says_so_in_its_own_tab(built):
    state, blocks = built
    job_a, _ = running_job(state, "tab-A")
    # prompt .. clip skip, then the Extra seed options off (variation seed, strength, resize seed from width/height)
    form = ["a cube", "", "Euler", "Automatic", 2, 7, 64, 64, 1, 1, 1, 1, -1, 0, 0, 0]
    styles, hires_off = [], [False, "Latent", 2, 0, 0, 0, 0.7, "", "", "Use same sampler", "Use same scheduler"]
    run = handler(blocks, "txt2img_generate", "click").fn(SimpleNamespace(session_hash="tab-B"), *form, styles,
                                                          *hires_off, None, "")  # no script; "": no task id
    assert "Waiting in queue (1 job(s) ahead)" in next(run)[0]
    click(blocks, "txt2img_interrupt", "tab-B")
    updates = list(run)
    assert "Interrupted before it started: removed from the queue" in updates[-1][0]
    assert not job_a.control.interrupted
    click(blocks, "txt2img_interrupt", "tab-A")
    assert job_a.future.result(10) == "interrupted"
