"""A spy on the UNet's forward: the text context each model call receives, in call order. Prompt tests assert
on what reaches the UNet (schedules, AND rows, emphasis, backtracking) rather than on pixels."""

from contextlib import contextmanager


@contextmanager
def recorded_unet_contexts(pipe):
    """Yield a list that fills with a copy of `encoder_hidden_states` at every UNet call; the forward is
    restored on exit, also when the generation raises."""
    seen = []
    original = pipe.model.unet.forward

    def spy(sample, timestep, encoder_hidden_states=None, **kwargs):
        seen.append(encoder_hidden_states.detach().clone())
        return original(sample, timestep, encoder_hidden_states=encoder_hidden_states, **kwargs)

    pipe.model.unet.forward = spy
    try:
        yield seen
    finally:
        pipe.model.unet.forward = original
