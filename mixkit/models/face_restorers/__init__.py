"""The face restoration networks A1111 users drop in: GFPGAN (GFPGANv1.3 / v1.4, `gfpgan`) and CodeFormer
(`codeformer`), written from the papers and the official checkpoints' key layouts.

    from mixkit.models.face_restorers import load_face_restorer
    arch_name, restorer = load_face_restorer("models/GFPGAN/GFPGANv1.4.pth", device="cuda", dtype=torch.float16)
    restored = restorer(aligned_faces, weight=0.5)  # [N, 3, 512, 512] in [-1, 1] -> same; weight: CodeFormer's w

The network and every size are read from the tensors (`layouts`), so a renamed or retrained file loads. Detection,
alignment and pasting faces back live elsewhere; this package only restores aligned faces.
"""

from mixkit.models.face_restorers.codeformer import CodeFormer, CodeFormerConfig
from mixkit.models.face_restorers.faces import DEFAULT_FIDELITY
from mixkit.models.face_restorers.gfpgan import GFPGAN, GFPGANConfig
from mixkit.models.face_restorers.layouts import SUPPORTED, UnknownFaceRestorerError, detect_face_restorer
from mixkit.models.face_restorers.loading import (
    FACE_RESTORER_SUFFIXES,
    build_face_restorer,
    load_face_restorer,
    read_face_restorer_weights,
)
from mixkit.models.face_restorers.vqgan import VQGANSizes

__all__ = [
    "CodeFormer", "CodeFormerConfig", "DEFAULT_FIDELITY", "FACE_RESTORER_SUFFIXES", "GFPGAN", "GFPGANConfig",
    "SUPPORTED", "UnknownFaceRestorerError", "VQGANSizes", "build_face_restorer", "detect_face_restorer",
    "load_face_restorer", "read_face_restorer_weights",
]
