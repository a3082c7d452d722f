"""Evaluate mid-training without disturbing it: modules in eval mode for a block, then back as they were."""

from __future__ import annotations

import contextlib

from torch import nn


@contextlib.contextmanager
def eval_mode(*modules: nn.Module):
    """Each module (and its children) in eval mode for the block — dropout off, so measurements draw no
    random numbers and the training RNG stream is untouched — and back to its own mode after, also on errors."""
    modes = [(module, module.training) for module in modules]
    for module, _ in modes:
        module.eval()
    try:
        yield
    finally:
        for module, training in modes:
            module.train(training)
