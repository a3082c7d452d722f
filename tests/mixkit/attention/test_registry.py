"""The backend registry: the entries the issue asks for, their declarations, and install errors."""

from __future__ import annotations

import pytest
import torch

import mixkit.attention as mixkit_attention
from mixkit.attention import (
    ATTENTION_BACKENDS,
    AttentionBackend,
    AttentionBackendUnavailableError,
    available_backend_names,
    set_attention_backend,
)
from mixkit.attention.math_attention import math_attention
from mixkit.errors import MixkitError


def test_the_issue_backends_are_registered():
    for name in ("math", "sdpa", "sdpa_flash", "sdpa_efficient", "sdpa_math", "flash_attn", "xformers"):
        assert ATTENTION_BACKENDS.get(name).name == name


@pytest.mark.parametrize("name", ATTENTION_BACKENDS.names())
def test_every_backend_declares_how_to_get_it_and_what_it_is(name):
    backend = ATTENTION_BACKENDS.get(name)
    assert backend.description and backend.install_hint
    assert isinstance(backend.is_available(), bool)


def test_torch_backends_are_always_available_and_optional_ones_say_how_to_install(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert {"math", "sdpa", "sdpa_flash", "sdpa_efficient", "sdpa_math"} <= set(available_backend_names())
    assert "pip install 'mixkit[cuda]'" in ATTENTION_BACKENDS.get("flash_attn").install_hint
    assert "pip install xformers" in ATTENTION_BACKENDS.get("xformers").install_hint


def test_without_cuda_cuda_only_kernels_are_not_offered(monkeypatch):
    """Was: the flash_attn error offered sdpa_efficient on a CPU-only machine, which then refused every call."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    names = available_backend_names()
    assert {"math", "sdpa", "sdpa_flash", "sdpa_math"} <= set(names)
    assert not [name for name in names if ATTENTION_BACKENDS.get(name).cuda_only]
    message = ATTENTION_BACKENDS.get("flash_attn").unavailable_message()
    assert "sdpa_efficient" not in message and "available backends: math, sdpa, sdpa_flash, sdpa_math" in message


@pytest.mark.parametrize("name, package", [("flash_attn", "flash-attn"), ("xformers", "xformers")])
def test_requesting_a_missing_optional_backend_says_what_to_install(name, package):
    backend = ATTENTION_BACKENDS.get(name)
    if backend.is_available():
        pytest.skip(f"{package} is installed here, so the missing-package error cannot be shown")
    with pytest.raises(AttentionBackendUnavailableError, match="pip install") as caught:
        set_attention_backend(name)
    assert isinstance(caught.value, ImportError) and isinstance(caught.value, MixkitError)
    assert name in str(caught.value) and "sdpa" in str(caught.value)  # lists what is available instead


def test_unavailable_backend_error_is_raised_at_request_time_not_at_first_call(monkeypatch):
    missing = AttentionBackend(name="not_installed", fn=math_attention, description="test",
                               is_available=lambda: False, install_hint="pip install not-installed-kernels")
    monkeypatch.setitem(ATTENTION_BACKENDS._entries, "not_installed", missing)
    with pytest.raises(ImportError, match="pip install not-installed-kernels"):
        with mixkit_attention.attention_backend("not_installed"):
            pass
    q = torch.zeros(1, 1, 2, 4)
    with pytest.raises(ImportError, match="not-installed-kernels"):
        mixkit_attention.attention(q, q, q, backend="not_installed")


def test_registering_a_backend_twice_is_refused():
    with pytest.raises(ValueError, match="already registered"):
        mixkit_attention.register_backend(AttentionBackend(name="math", fn=math_attention, description="dup"))


def test_import_is_light():
    """diffusers/transformers are imported inside functions only, never at module level."""
    import ast
    from pathlib import Path

    package = Path(mixkit_attention.__file__).parent
    heavy = {"diffusers", "transformers", "xformers", "flash_attn", "flash_attn_interface"}
    for source in sorted(package.glob("*.py")):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for node in tree.body:  # module level only; imports inside functions are lazy by design
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not {n.split(".")[0] for n in names} & heavy, f"{source.name} imports {names} at module level"
