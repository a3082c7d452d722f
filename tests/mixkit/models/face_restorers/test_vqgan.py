"""The VQGAN block lists and CodeFormer's fusion points reproduce the official layout's indices."""

from mixkit.models.face_restorers.vqgan import VQGANSizes, encoder_plan, generator_plan


def test_official_fusion_tables():
    encoder, encoder_taps = encoder_plan(VQGANSizes())
    generator, generator_taps = generator_plan(VQGANSizes())
    # codeformer_arch.py's fuse_encoder_block / fuse_generator_block
    assert encoder_taps == {512: 2, 256: 5, 128: 8, 64: 11, 32: 14, 16: 18}
    assert generator_taps == {16: 6, 32: 9, 64: 12, 128: 15, 256: 18, 512: 21}
    assert len(encoder) == len(generator) == 25
    assert [kind for kind, _, _ in encoder[16:25]] == ["res", "attn", "res", "attn", "res", "attn", "res", "norm",
                                                       "conv"]
    assert encoder[-1] == ("conv", 512, 256) and generator[0] == ("conv", 256, 512) and generator[-1] == ("conv", 64, 3)


def test_every_tap_follows_a_residual_block_at_its_resolution():
    sizes = VQGANSizes(base_channels=32, channel_multipliers=(1, 2, 2), res_blocks=3, attn_resolutions=(32,),
                       code_dim=8, image_size=64)
    for plan, taps in (encoder_plan(sizes), generator_plan(sizes)):
        assert sorted(taps) == [16, 32, 64]
        assert all(plan[index][0] == "res" for index in taps.values())
    _, generator_taps = generator_plan(sizes)
    # 16 px: res 4, 5, 6 (the last); 32 px: res 8 (the first) then attention; 64 px: res 15 (the first)
    assert generator_taps == {16: 6, 32: 8, 64: 15}
