"""Faces in a picture: RetinaFace detection, FFHQ 5-point alignment and paste-back.

This is the part of A1111's "Restore faces" around the restorer network (GFPGAN / CodeFormer): find each face and its
five landmarks (`detection`, networks in `retinaface`), warp it onto facexlib's 512×512 FFHQ template, and paste the
restored face back through the inverse transform under a soft mask (`alignment`) or, as A1111, under the mask of the
face classes facexlib's ParseNet finds in it (`parsenet`, `parse_mask`). Written in torch alone, so no
facexlib, OpenCV or torchvision is needed; the checkpoints are facexlib's own files.
"""

from mixkit.models.face.alignment import (FFHQ_TEMPLATE_512, align_face, fit_similarity, invert_affine,
                                          paste_face, paste_mask, warp_affine)
from mixkit.models.face.detection import (DetectedFace, decode_boxes, decode_landmarks, detect_faces, load_retinaface,
                                          nms, prior_boxes)
from mixkit.models.face.parse_mask import face_classes, parse_mask, paste_face_parsed
from mixkit.models.face.parsenet import ParseNet, ParseNetConfig, load_parsenet
from mixkit.models.face.retinaface import RetinaFace, RetinaFaceConfig

__all__ = ["FFHQ_TEMPLATE_512", "DetectedFace", "ParseNet", "ParseNetConfig", "RetinaFace", "RetinaFaceConfig",
           "align_face", "decode_boxes", "decode_landmarks", "detect_faces", "face_classes", "fit_similarity",
           "invert_affine", "load_parsenet", "load_retinaface", "nms", "parse_mask", "paste_face", "paste_face_parsed",
           "paste_mask", "prior_boxes", "warp_affine"]
