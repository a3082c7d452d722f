"""Make a loaded diffusion model fast or small: precision, layout, fused QKV, compile, memory modes,
execution backends (`torch`, `torch.compile`, `openvino`).

    from mixkit.runtime import PRESETS, apply_runtime
    report = apply_runtime(model, PRESETS.get("fast"), backend="torch")
    print(report.summary())     # what was applied, and every fallback taken

Pipelines use it through `pipelines.optimize.optimize(pipe, preset, backend)`.
"""

from mixkit.runtime.apply import apply_runtime, check_backend_supports, resolve_precision
from mixkit.runtime.backends import EXECUTION_BACKENDS, execution_backend_names
from mixkit.runtime.capability import PrecisionChoice, choose_fast_precision, cpu_has_native_bf16
from mixkit.runtime.compile import compile_module, restore_eager, use_compile_cache
from mixkit.runtime.config import PRESETS, RuntimeConfig
from mixkit.runtime.cpu_linear import onednn_small_batch_linears
from mixkit.runtime.fused_qkv import FusedQkvAttnProcessor, fuse_qkv
from mixkit.runtime.memory import enable_offload, require_accelerate
from mixkit.runtime.report import OptimizationReport, RuntimeFallbackWarning
from mixkit.runtime.vae_guard import guarded_decode, install_vae_guard, remove_vae_guard

__all__ = [
    "EXECUTION_BACKENDS", "FusedQkvAttnProcessor", "OptimizationReport", "PRESETS", "PrecisionChoice",
    "RuntimeConfig", "RuntimeFallbackWarning", "apply_runtime", "check_backend_supports", "choose_fast_precision", "compile_module",
    "cpu_has_native_bf16", "enable_offload", "execution_backend_names", "fuse_qkv", "guarded_decode",
    "install_vae_guard", "onednn_small_batch_linears", "remove_vae_guard", "require_accelerate", "resolve_precision", "restore_eager",
    "use_compile_cache",
]
