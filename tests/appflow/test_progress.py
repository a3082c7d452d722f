"""`Appflow(...)(callback=, control=)` (appflow/progress.py): the caller's step callback and Interrupt reach the
chain's SD pipeline calls, as the web UI's worker hands its own to txt2img."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from appflow import AppInterrupted, Appflow, Chain, Step
from pipelines.control import GenerationControl

SD_FAST = dict(steps=3, seed=7, width=32, height=32)


@pytest.fixture(scope="module")
def flow(tiny_sd1_dir, shared_cache):
    return Appflow("text2image_generation", models=[tiny_sd1_dir], cache=shared_cache, **SD_FAST)


def test_the_callback_sees_every_sampling_step_and_the_image_is_unchanged(flow):
    seen = []
    with_callback = flow(prompt="a cat", batch_count=2, callback=lambda state: seen.append(
        (state.step, state.total_steps, state.batch_index, state.batch_count)))
    assert seen == [(step, 3, batch, 2) for batch in (0, 1) for step in (1, 2, 3)]
    plain = flow(prompt="a cat", batch_count=2)
    assert [np.asarray(image).tolist() for image in with_callback["images"]] == \
        [np.asarray(image).tolist() for image in plain["images"]]


def test_interrupt_stops_the_sd_step_at_its_next_step_and_keeps_what_it_has(flow):
    control, seen = GenerationControl(), []

    def interrupt_at_first_step(state):
        seen.append(state.step)
        control.interrupt()

    result = flow(prompt="a cat", batch_count=2, callback=interrupt_at_first_step, control=control)
    assert seen == [1] and len(result["images"]) == 1  # the second batch never started
    assert result.interrupted is True
    assert flow(prompt="a cat", control=GenerationControl()).interrupted is False


def test_an_interrupt_before_the_first_image_is_app_interrupted_not_an_index_error(flow):
    """Ctrl-C while the model loads: the pipeline's batch loop makes no image, and the step has nothing to hand on."""
    control = GenerationControl()
    control.interrupt()
    with pytest.raises(AppInterrupted, match=r"interrupted in step '.*' before it made anything; no outputs were made"
                       ) as stopped:
        flow(prompt="a cat", control=control)
    assert stopped.value.partial.interrupted is True and dict(stopped.value.partial) == {}


def test_a_chain_interrupted_with_steps_left_stops_before_the_next_one(tiny_sd1_dir, shared_cache):
    chain = Chain("draft_then_refine", [Step("text_to_image", id="draft"),
                                        Step("image_to_image", id="refine", inputs={"prompt": "prompt"})],
                  inputs=["prompt"])
    control, seen = GenerationControl(), []

    def interrupt_in_the_draft(state):
        seen.append(state.total_steps)
        control.interrupt()

    flow = Appflow(chain, models=[tiny_sd1_dir], cache=shared_cache, **SD_FAST)
    with pytest.raises(AppInterrupted, match=r"App 'draft_then_refine' was interrupted before step 'refine'; only "
                                             r"\['images'\] were made") as stopped:
        flow(prompt="a cat", callback=interrupt_in_the_draft, control=control)
    assert seen == [3]  # the refine step's sampler never ran
    # what finished is handed over, as A1111's Interrupt keeps a batch's finished images: the draft's images (its
    # image, infotexts and seeds are names the refine step's outputs take, which it never made)
    partial = stopped.value.partial
    assert list(partial) == ["images"] and len(partial["images"]) == 1 and partial.interrupted
    assert partial["prompt"] == "a cat"  # inputs are still found by name, as on a finished run's result


def test_hooks_are_per_call_and_per_thread(flow):
    from appflow.progress import RunHooks, pipeline_hooks, running_with

    assert pipeline_hooks() == {}  # outside a call: the pipeline gets no keywords
    control = GenerationControl()
    with running_with(RunHooks(control=control)):
        other = []
        thread = threading.Thread(target=lambda: other.append(pipeline_hooks()))
        thread.start(), thread.join()
        assert pipeline_hooks() == {"control": control} and other == [{}]
    assert pipeline_hooks() == {}


def test_bad_hooks_are_refused_before_any_work(flow):
    with pytest.raises(TypeError, match="callback must be a function taking a StepProgress, or None; got str"):
        flow(prompt="a cat", callback="print")
    with pytest.raises(TypeError, match=r"control must be a pipelines.control.GenerationControl or None; got bool"):
        flow(prompt="a cat", control=True)
