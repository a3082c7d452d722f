"""Faces in a picture: RetinaFace detection, FFHQ 5-point alignment and paste-back.

This is the part of A1111's "Restore faces" around the restorer network (GFPGAN / CodeFormer): find each face and its
five landmarks (`detection`, networks in `retinaface`), warp it onto facexlib's 512×512 FFHQ template, and paste the
restored face back through the inverse transform under a soft mask (`alignment`). Written in torch alone, so no
facexlib, OpenCV or torchvision is needed; the checkpoints are facexlib's own files.
"""

from mixkit.models.face.alignment import (FFHQ_TEMPLATE_512, align_face, fit_similarity, invert_affine,
                                          paste_face, paste_mask, warp_affine)
from mixkit.models.face.detection import (DetectedFace, decode_boxes, decode_landmarks, detect_faces, load_retinaface,
                                          nms, prior_boxes)
from mixkit.models.face.retinaface import RetinaFace, RetinaFaceConfig

__all__ = ["FFHQ_TEMPLATE_512", "DetectedFace", "RetinaFace", "RetinaFaceConfig", "align_face", "decode_boxes",
           "decode_landmarks", "detect_faces", "fit_similarity", "invert_affine", "load_retinaface", "nms",
           "paste_face", "paste_mask", "prior_boxes", "warp_affine"]
