"""`import mixkit` quiets the warnings torchao's import causes (diffusers imports torchao on every model load once
it is installed), and only those."""

import logging
import os
import subprocess
import sys
from enum import Enum


def test_loading_a_model_prints_no_torch_warning_about_torchao_enums(tiny_sd1_dir):
    # diffusers imports torchao itself (its torchao quantizer), so mixkit cannot make that import lazy; torch then
    # warns that torchao's KernelPreference / ScaleCalculationMode Enums need no pytree registration.
    code = ("import sys\nfrom pipelines.txt2img import TextToImage\n"
            f"TextToImage.from_pretrained({str(tiny_sd1_dir)!r})\nprint('torchao' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"]  # the import that warns did happen
    assert "Enum subclass" not in done.stderr and "_pytree" not in done.stderr, done.stderr


class OtherLibrarysEnum(Enum):
    A = 1


def test_the_same_warning_about_another_librarys_enum_still_shows():
    from mixkit import _not_torchao_enum_registration

    message = "%s is an Enum subclass and is now natively supported by torch.compile as an opaque value type."
    record = logging.LogRecord("torch.utils._pytree", logging.WARNING, "_pytree.py", 630, message,
                               (OtherLibrarysEnum,), None)
    assert _not_torchao_enum_registration(record)
    OtherLibrarysEnum.__module__ = "torchao.quantization.quantize_.common.kernel_preference"
    try:
        assert not _not_torchao_enum_registration(record)
    finally:
        OtherLibrarysEnum.__module__ = __name__
