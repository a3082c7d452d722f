"""Spies on the UNet's forward: the text context or the input latents each model call receives, in call order. Tests
assert on what reaches the UNet (prompt schedules, AND rows, emphasis, an inpainting model's mask and masked image)
rather than on pixels.

A replaced forward is put back by removing the instance attribute, not by assigning the saved bound method: that
bound method stayed in the module's `__dict__`, where DeepCache read it as a compiled forward and refused the model
(it now tells the two apart; the runtime's Linear rewrites still take any instance forward for a patch), so a later
test on the session's shared `sd1_pipe` failed or passed by test order. `tests/pipelines/conftest.py` fails a test
that leaves one behind.
"""

from contextlib import contextmanager

import pytest

_ABSENT = object()


@contextmanager
def replaced_forward(module, forward):
    """`module.forward` is `forward` inside the block; on exit the module's `__dict__` is as it was, also when the
    block raises."""
    before = module.__dict__.get("forward", _ABSENT)
    module.forward = forward
    try:
        yield module
    finally:
        if before is _ABSENT:
            module.__dict__.pop("forward", None)
        else:
            module.forward = before


def replace_forward_for_the_test(monkeypatch, module, forward) -> None:
    """`module.forward` is `forward` until the test ends, then the entry is removed again. `monkeypatch.setattr` does
    that only in recent pytest (9.2 does); the pytest 8 that pyproject allows puts the bound method back as an
    instance attribute."""
    monkeypatch.setitem(module.__dict__, "forward", forward)


def fail_if_called(monkeypatch, module) -> None:
    """Any call of `module` until the test ends fails it (a check that must refuse before the model runs)."""
    def called(*args, **kwargs):
        pytest.fail(f"the {type(module).__name__} ran")  # an outcome, not an Exception: no handler swallows it
    replace_forward_for_the_test(monkeypatch, module, called)


@contextmanager
def recorded_unet_contexts(pipe):
    """Yield a list that fills with a copy of `encoder_hidden_states` at every UNet call; the forward is
    restored on exit, also when the generation raises."""
    seen = []
    original = pipe.model.unet.forward

    def spy(sample, timestep, encoder_hidden_states=None, **kwargs):
        seen.append(encoder_hidden_states.detach().clone())
        return original(sample, timestep, encoder_hidden_states=encoder_hidden_states, **kwargs)

    with replaced_forward(pipe.model.unet, spy):
        yield seen


@contextmanager
def recorded_calls(unet, name: str, log: list):
    """Append (name, timestep, context width, time ids or None) to `log` at every call of `unet` (several UNets may
    share one log, to see which one predicted which call); the forward is restored on exit."""
    original = unet.forward

    def spy(sample, timestep, encoder_hidden_states=None, added_cond_kwargs=None, **kwargs):
        time_ids = None if added_cond_kwargs is None else added_cond_kwargs["time_ids"].detach().clone()
        log.append((name, float(timestep), encoder_hidden_states.shape[-1], time_ids))
        return original(sample, timestep, encoder_hidden_states=encoder_hidden_states,
                        added_cond_kwargs=added_cond_kwargs, **kwargs)

    with replaced_forward(unet, spy):
        yield log


@contextmanager
def recorded_unet_inputs(pipe):
    """Yield a list that fills with a copy of the UNet's input (for a 9-channel inpainting model: latents, mask,
    masked image) at every call; the hook is removed on exit, also when the generation raises."""
    seen = []
    handle = pipe.model.unet.register_forward_pre_hook(lambda module, args: seen.append(args[0].detach().clone()))
    try:
        yield seen
    finally:
        handle.remove()


def run_base_and_refiner(pipe, refiner_model, **settings):
    """Run `pipe(refiner=refiner_model, **settings)` and return (result, log): `log` holds `recorded_calls` rows, named
    "base" for the pipeline's own UNet and "refiner" for the refiner's, in call order."""
    log = []
    with recorded_calls(pipe.model.unet, "base", log), recorded_calls(refiner_model.unet, "refiner", log):
        result = pipe(**{"refiner": refiner_model, **settings})
    return result, log
