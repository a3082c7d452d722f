"""Training on accelerate: SD LoRA/LoCon (kohya-format output), CLIP contrastive; objectives as pure functions.

Entry points (import from the submodules; this package imports nothing heavy):
- `sd_lora_trainer.train_sd_lora(SDLoraTrainingConfig(...))`: LoRA/LoCon for SD 1.x/2.x/SDXL.
- `ti_trainer.train_textual_inversion(SDTextualInversionConfig(...))`: textual-inversion embeddings (kohya/A1111 files).
- `clip_trainer.train_clip(ClipTrainingConfig(...))`: CLIP fine-tuning with all-gathered negatives.
- `trainers.TRAINERS`: every trainer by name, as `mixkit train <name>` sees them.
- `losses`: CLIP and BLIP-2 objectives; `diffusion_objective`: noise, targets, min-SNR weights.
"""
