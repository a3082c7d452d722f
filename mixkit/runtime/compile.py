"""`torch.compile` with an on-disk cache and a fallback to eager that never crashes a generation.

Compilation is lazy: `torch.compile` itself rarely fails; the failure comes with the first call
(unsupported op, missing C++ compiler, ...). So the compiled forward is wrapped: the first failure
runs the same call eagerly; if eager works, the module stays eager for good and a warning says
why; if eager fails too, that error is the user's and is raised.

Inductor's FX-graph and kernel caches live in TORCHINDUCTOR_CACHE_DIR; pointing it at mixkit's
cache folder lets a second process reuse the first one's compiled code instead of recompiling.
Torch fills that variable in itself with its default (`/tmp/torchinductor_<user>`) the first time
anything asks for the folder, and importing diffusers does, so "already set" does not mean "the
user chose it": only a value other than torch's default is the user's choice.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from mixkit.forward_patches import install_forward_patch
from mixkit.runtime.report import OptimizationReport

_EAGER = "_mixkit_eager_forward"


def default_cache_dir() -> Path:
    from mixkit.io.cache_root import cache_root

    return cache_root() / "compile"


def user_inductor_cache_dir() -> str | None:
    """$TORCHINDUCTOR_CACHE_DIR when the user set it, None when it is unset or torch's own default."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir as torch_default

    chosen = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not chosen or os.path.abspath(chosen) == os.path.abspath(torch_default()):
        return None
    return chosen


def compile_cache_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """Where inductor's caches go: `cache_dir` if given, else a $TORCHINDUCTOR_CACHE_DIR the user set,
    else `compile/` in mixkit's cache folder ($MIXKIT_CACHE_DIR, where `mixkit cache` finds it)."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser().absolute()
    chosen = user_inductor_cache_dir()
    return Path(chosen).absolute() if chosen is not None else default_cache_dir().absolute()


def use_compile_cache(cache_dir: str | os.PathLike | None = None) -> Path:
    """Point inductor's persistent caches at `compile_cache_dir(cache_dir)`; returns that folder."""
    path = compile_cache_dir(cache_dir)
    path.mkdir(parents=True, exist_ok=True)
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR") != str(path):
        from torch._inductor.utils import clear_caches

        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(path)
        clear_caches()  # inductor memoises paths under the old folder (e.g. its local cache path)
    return path


def compile_module(module: torch.nn.Module, report: OptimizationReport, *, freezing: bool = True,
                   cache_dir: str | os.PathLike | None = None, name: str = "UNet") -> bool:
    """Compile `module.forward` in place (module identity and names kept, so LoRA matching works).

    Returns False (with a RuntimeFallbackWarning) when compilation is refused up front.
    """
    restore_eager(module)
    eager = module.forward
    try:
        cache = use_compile_cache(cache_dir)
        # freezing folds weights into the graph: ~+40% on CPU, but weights must not change later;
        # mixkit's LoRA merge writes them in place, so a LoRA change after compiling needs a recompile.
        compiled = torch.compile(eager, options={"freezing": freezing} if freezing else None)
    except Exception as error:  # noqa: BLE001 - any compile failure means: run eager
        report.fallback(f"torch.compile of the {name} failed ({type(error).__name__}: {error}); running eager")
        return False

    def forward(below, *args, **kwargs):
        try:
            return compiled(*args, **kwargs)
        except Exception as error:  # noqa: BLE001
            result = below(*args, **kwargs)  # a user error raises here, from eager code
            restore_eager(module)
            report.backend = "torch"  # what runs from this image on: the report and the labels say so
            report.fallback(f"compiled {name} failed on first use ({type(error).__name__}: {error}); "
                            "switched to eager for good")
            return result

    # the patch is also the marker other code checks for a compiled module (DeepCache, FreeU, int8, HyperTile)
    module.__dict__[_EAGER] = install_forward_patch(module, forward, "torch.compile")
    report.step(f"torch.compile {name} (freezing={freezing}, cache {cache})")
    return True


def restore_eager(module: torch.nn.Module) -> None:
    """Take the compiled forward out, putting back the forward that was there before it (`ForwardPatch.remove`)."""
    patch = module.__dict__.pop(_EAGER, None)
    if patch is not None:
        patch.remove()
