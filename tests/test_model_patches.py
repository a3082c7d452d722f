"""The suite-wide leftover check (tests/conftest.py `shared_models_left_as_found`, tests/model_patches.py) covers the
models loaded once per module under tests/mixkit too: a test that leaves a forward or a VAE decode patch on
`sd1_model` fails, and the next test of the module gets the model back clean.

Run as an inner pytest session on a copy of the two files, with `sd1_model` stood in by a few tiny modules, so it
costs no model loading."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent
REPOSITORY = TESTS.parent

STAND_IN = '''
import pytest
import torch


class Decoder(torch.nn.Module):
    def decode(self, z):
        return z


class Model:
    def __init__(self):
        self.unet, self.vae, self.text_encoders = torch.nn.Linear(2, 2), Decoder(), [torch.nn.Linear(2, 2)]


@pytest.fixture(scope="module")
def sd1_model():
    return Model()
'''

LEAKING_TESTS = '''
from mixkit.forward_patches import install_forward_patch


def test_leaves_a_spy_on_the_unet(sd1_model):
    sd1_model.unet.forward = lambda x: x


def test_leaves_a_decode_patch_on_the_vae(sd1_model):
    assert "forward" not in sd1_model.unet.__dict__  # the first test's spy was taken off
    install_forward_patch(sd1_model.vae, lambda below, z: below(z), "forgotten", attribute="decode")


def test_gets_the_model_back_clean(sd1_model):
    assert "decode" not in sd1_model.vae.__dict__


def test_restoring_what_it_changed_passes(sd1_model):
    patch = install_forward_patch(sd1_model.text_encoders[0], lambda below, x: below(x), "removed again")
    patch.remove()
'''


def test_a_patch_left_on_a_per_module_model_fails_that_test_and_is_taken_off(tmp_path):
    inner = tmp_path / "tests"
    (inner / "mixkit").mkdir(parents=True)
    shutil.copy(TESTS / "conftest.py", inner / "conftest.py")
    shutil.copy(TESTS / "model_patches.py", inner / "model_patches.py")
    (inner / "mixkit" / "conftest.py").write_text(STAND_IN)
    (inner / "mixkit" / "test_leaks.py").write_text(LEAKING_TESTS)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "--import-mode=importlib",
                          "--rootdir", str(tmp_path), "-c", os.devnull, str(inner)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(REPOSITORY)})
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    assert "the test left patches on the shared sd1_model: forward on unet;" in output
    assert "the test left patches on the shared sd1_model: decode on vae;" in output
    assert "4 passed, 2 errors" in output, output
    assert "ERROR tests/mixkit/test_leaks.py::test_leaves_a_spy_on_the_unet" in output
    assert "ERROR tests/mixkit/test_leaks.py::test_leaves_a_decode_patch_on_the_vae" in output
