"""Super-resolution networks A1111 users upscale with: ESRGAN's RRDBNet, Real-ESRGAN's SRVGGNetCompact, SwinIR,
DAT, HAT, and the SCUNet denoiser (A1111's ScuNET).

The architectures are written from the papers' descriptions and the public checkpoints' shapes; every size
(blocks, features, growth, windows, heads, scale) is read from a checkpoint's tensors by `layouts`, and `loading`
turns a file into a ready module.
"""
