"""A1111's paste-back mask from face parsing (facexlib `FaceRestoreHelper(use_parse=True)`), in torch.

ParseNet labels each pixel of the restored 512×512 face with one of 19 classes; the face classes become 255 and the
rest (background, hat, necklace, neck, cloth) 0. That map is Gaussian-blurred twice (101×101,
sigma 11), a 10-pixel frame is zeroed so the warp's edge never shows, it is scaled to 0..1 and warped back into the
picture with the face. There it is the blend weight on its own: facexlib replaces the square soft mask by it and
pastes the un-eroded restored face, so hair and neck blend where the parser says, not along a square.
"""

from __future__ import annotations

import torch

from mixkit.models.face.alignment import _gaussian_blur, invert_affine, warp_affine

# facexlib's MASK_COLORMAP: 255 keeps the restored pixel, 0 keeps the picture's. Left out: 0 background, 14 hat,
# 16 necklace, 17 neck, 18 cloth (PSFRGAN's CelebAMask-HQ order; 15, earrings, is kept).
FACE_CLASS_VALUES = (0, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 0, 255, 0, 0, 0)
PARSE_BLUR_KERNEL, PARSE_BLUR_SIGMA = 101, 11.0
PARSE_MASK_FRAME = 10  # pixels zeroed along each edge of the blurred map ("remove the black borders")


def face_classes(parser: torch.nn.Module, face: torch.Tensor) -> torch.Tensor:
    """The class of each pixel [S, S] (long) that `parser` (ParseNet) gives the restored `face` [3, S, S] in 0..255.

    A1111 hands facexlib the restored face as uint8 (truncated, not rounded) and facexlib feeds it to the parser as
    RGB in [-1, 1]; the same is done here so the argmax sees the same pixels.
    """
    parameter = next(parser.parameters())
    batch = (face.float().clamp(0, 255).floor() / 127.5 - 1.0)[None].to(device=parameter.device,
                                                                          dtype=parameter.dtype)
    logits = parser(batch)[0]
    return logits.argmax(1)[0]


def parse_mask(classes: torch.Tensor) -> torch.Tensor:
    """facexlib's blend mask [S, S] (float32 in 0..1, face-aligned) built from a class map [S, S].

    OpenCV blurs facexlib's float64 map in double; float32 here is ~9× faster on a CPU (0.1 s against 0.9 s for the
    two 101-tap passes at 512²) and stays within a few 1e-6 of it, far below one 8-bit level of the pasted picture.
    """
    values = torch.tensor(FACE_CLASS_VALUES, dtype=torch.float32, device=classes.device)
    if int(classes.min()) < 0 or int(classes.max()) >= len(values):
        raise ValueError(f"Face parsing classes must be 0..{len(values) - 1}, got {int(classes.min())}.."
                         f"{int(classes.max())}; the parser is not facexlib's 19-class ParseNet.")
    mask = values[classes.long()]
    mask = _gaussian_blur(_gaussian_blur(mask, PARSE_BLUR_KERNEL, PARSE_BLUR_SIGMA), PARSE_BLUR_KERNEL,
                          PARSE_BLUR_SIGMA)
    frame = PARSE_MASK_FRAME
    mask[:frame], mask[-frame:], mask[:, :frame], mask[:, -frame:] = 0.0, 0.0, 0.0, 0.0
    return mask / 255.0


def paste_face_parsed(image: torch.Tensor, face: torch.Tensor, matrix: torch.Tensor,
                      mask: torch.Tensor) -> torch.Tensor:
    """`image` [3, H, W] with `face` [3, S, S] (aligned by `matrix`, image → face) blended back under the face-aligned
    parse `mask` [S, S], warped back bilinearly with a zero border as facexlib does (cv2 flags=3 is INTER_AREA, which
    warpAffine runs as bilinear). Pixels the warped mask does not reach keep their exact value."""
    height, width = image.shape[1:]
    inverse = invert_affine(matrix)
    restored = warp_affine(face.float(), inverse, (width, height))
    weight = warp_affine(mask[None].float(), inverse, (width, height))[0].to(image.device)
    return weight * restored.to(image.device) + (1 - weight) * image.float()
