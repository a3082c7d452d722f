import os

import pytest
import torch

from mixkit.runtime.compile import compile_module, restore_eager, use_compile_cache
from mixkit.runtime.report import OptimizationReport, RuntimeFallbackWarning


class Doubler(torch.nn.Module):
    def forward(self, x):
        if x.shape[-1] != 3:
            raise ValueError(f"expected 3 features, got {x.shape[-1]}")
        return x * 2


@pytest.fixture(autouse=True)
def torch_default_inductor_dir(tmp_path, monkeypatch):
    """The state every mixkit process is in: mixkit's cache in a temporary folder, and
    $TORCHINDUCTOR_CACHE_DIR holding torch's own default, as importing diffusers leaves it
    (torch._inductor.runtime.cache_dir_utils.cache_dir() writes the default into the variable).
    Setting the variable to a folder of the test's own would hide where mixkit puts the kernels."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir, default_cache_dir

    monkeypatch.setenv("MIXKIT_CACHE_DIR", str(tmp_path / "mixkit"))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    cache_dir()  # what `import diffusers` does
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == os.path.abspath(default_cache_dir())
    return default_cache_dir()


def test_compile_cache_goes_to_mixkit_cache_dir_over_torchs_default(tmp_path):
    assert use_compile_cache() == tmp_path / "mixkit" / "compile"
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mixkit" / "compile")


def test_explicit_cache_dir_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "users-own"))
    assert use_compile_cache(tmp_path / "mine") == tmp_path / "mine"
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mine")


def test_a_folder_the_user_set_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "users-own"))
    assert use_compile_cache() == tmp_path / "users-own"
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "users-own")


def test_compiled_kernels_land_where_mixkit_cache_lists_and_clears_them(tmp_path, torch_default_inductor_dir):
    """A real inductor compile: its kernels are written under $MIXKIT_CACHE_DIR/compile, where
    `mixkit cache list` / `mixkit cache clear compile` look, and inductor itself reads that folder."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    from mixkit.io.cache_inventory import cache_entries

    torch._dynamo.reset()
    module, report = Doubler(), OptimizationReport("fast", "torch.compile")
    assert compile_module(module, report, freezing=False)
    assert torch.equal(module(torch.ones(2, 3)), torch.full((2, 3), 2.0))
    assert report.fallbacks == [] and report.applied == [f"torch.compile UNet (freezing=False, cache {tmp_path / 'mixkit' / 'compile'})"]
    assert cache_dir() == str(tmp_path / "mixkit" / "compile")
    written = [path for path in (tmp_path / "mixkit" / "compile").rglob("*") if path.is_file()]
    assert written, "inductor wrote no file under $MIXKIT_CACHE_DIR/compile"
    compile_entries = [entry for entry in cache_entries() if entry.kind == "compile"]
    assert len(compile_entries) == 1 and compile_entries[0].size == sum(path.stat().st_size for path in written)


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


def test_a_cache_dir_with_a_tilde_is_the_users_folder(monkeypatch, tmp_path):
    """QA: optimize(cache_dir="~/x") made a literal ./~/x folder; `~` is expanded as $MIXKIT_CACHE_DIR's is."""
    from mixkit.runtime.compile import compile_cache_dir

    monkeypatch.setenv("HOME", str(tmp_path))
    assert compile_cache_dir("~/kernels") == tmp_path / "kernels"



def test_restore_puts_back_the_forward_that_was_there(monkeypatch):
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)
    module = Doubler()
    own = module.forward
    module.forward = own  # the class's forward put back by an earlier spy: an instance attribute
    compile_module(module, OptimizationReport("fast", "torch.compile"))
    assert module.__dict__["forward"] is not own
    restore_eager(module)
    assert module.__dict__["forward"] is own and "_mixkit_eager_forward" not in module.__dict__


def test_restore_keeps_a_spy_stacked_on_the_compiled_forward(monkeypatch):
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)
    module = Doubler()
    compile_module(module, OptimizationReport("fast", "torch.compile"))
    compiled, calls = module.forward, []

    def spy(x):
        calls.append(x)
        return compiled(x)

    module.forward = spy
    restore_eager(module)  # used to delete the spy (the top forward), leaving the class's forward
    assert module.__dict__["forward"] is spy and "_mixkit_eager_forward" not in module.__dict__
    assert torch.equal(module(torch.ones(1, 3)), torch.full((1, 3), 2.0)) and len(calls) == 1
