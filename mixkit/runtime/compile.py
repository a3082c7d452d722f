"""`torch.compile` with an on-disk cache and a fallback to eager that never crashes a generation.

Compilation is lazy: `torch.compile` itself rarely fails; the failure comes with the first call
(unsupported op, missing C++ compiler, ...). So the compiled forward is wrapped: the first failure
runs the same call eagerly; if eager works, the module stays eager for good and a warning says
why; if eager fails too, that error is the user's and is raised.

Inductor's FX-graph and kernel caches live in TORCHINDUCTOR_CACHE_DIR; pointing it at mixkit's
cache folder lets a second process reuse the first one's compiled code instead of recompiling.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from mixkit.runtime.report import OptimizationReport

_EAGER = "_mixkit_eager_forward"


def default_cache_dir() -> Path:
    from mixkit.io.cache_root import cache_root

    return cache_root() / "compile"


def use_compile_cache(cache_dir: str | os.PathLike | None = None) -> Path:
    """Point inductor's persistent caches at `cache_dir` (unless the user already chose a folder)."""
    path = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(path))
    return Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])


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

    def forward(*args, **kwargs):
        try:
            return compiled(*args, **kwargs)
        except Exception as error:  # noqa: BLE001
            result = eager(*args, **kwargs)  # a user error raises here, from eager code
            restore_eager(module)
            report.fallback(f"compiled {name} failed on first use ({type(error).__name__}: {error}); "
                            "switched to eager for good")
            return result

    module.forward = forward
    module.__dict__[_EAGER] = eager
    report.step(f"torch.compile {name} (freezing={freezing}, cache {cache})")
    return True


def restore_eager(module: torch.nn.Module) -> None:
    if _EAGER in module.__dict__:
        del module.__dict__["forward"]
        del module.__dict__[_EAGER]
