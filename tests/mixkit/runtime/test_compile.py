import pytest
import torch

from mixkit.runtime.compile import compile_module, restore_eager
from mixkit.runtime.report import OptimizationReport, RuntimeFallbackWarning


class Doubler(torch.nn.Module):
    def forward(self, x):
        if x.shape[-1] != 3:
            raise ValueError(f"expected 3 features, got {x.shape[-1]}")
        return x * 2


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))


def test_compile_refused_up_front_stays_eager(monkeypatch):
    def broken_compile(*args, **kwargs):
        raise RuntimeError("no C++ compiler found")

    monkeypatch.setattr(torch, "compile", broken_compile)
    module, report = Doubler(), OptimizationReport("fast", "torch.compile")
    with pytest.warns(RuntimeFallbackWarning, match="no C\\+\\+ compiler found.*running eager"):
        assert compile_module(module, report) is False
    assert "forward" not in module.__dict__
    assert torch.equal(module(torch.ones(1, 3)), torch.full((1, 3), 2.0))


def test_compile_failing_on_first_call_falls_back_for_good(monkeypatch):
    calls = []

    def lazily_broken_compile(fn, **kwargs):
        def compiled(*args, **kw):
            calls.append(1)
            raise RuntimeError("inductor lowering failed")
        return compiled

    monkeypatch.setattr(torch, "compile", lazily_broken_compile)
    module, report = Doubler(), OptimizationReport("fast", "torch.compile")
    assert compile_module(module, report) is True
    with pytest.warns(RuntimeFallbackWarning, match="inductor lowering failed.*eager"):
        out = module(torch.ones(1, 3))
    assert torch.equal(out, torch.full((1, 3), 2.0))
    module(torch.ones(1, 3))
    assert len(calls) == 1  # the compiled path is not retried
    assert "forward" not in module.__dict__


def test_user_error_is_raised_not_swallowed(monkeypatch):
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)  # "compiled" == eager: errors come from user input
    module = Doubler()
    compile_module(module, OptimizationReport("fast", "torch.compile"))
    with pytest.raises(ValueError, match="expected 3 features, got 4"):
        module(torch.ones(1, 4))


def test_compile_passes_freezing_and_restore(monkeypatch):
    seen = {}

    def recording_compile(fn, **kwargs):
        seen.update(kwargs)
        return fn

    monkeypatch.setattr(torch, "compile", recording_compile)
    module = Doubler()
    compile_module(module, OptimizationReport("fast", "torch.compile"), freezing=True)
    assert seen == {"options": {"freezing": True}}
    restore_eager(module)
    assert "forward" not in module.__dict__
