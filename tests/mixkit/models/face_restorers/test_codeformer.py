"""CodeFormer: the packed attention is torch's MultiheadAttention, AdaIN matches statistics, w blends the input."""

import pytest
import torch

from mixkit.models.face_restorers.codeformer import (
    CodeFormer,
    CodeFormerConfig,
    PackedSelfAttention,
    adaptive_instance_norm,
)
from mixkit.models.face_restorers.vqgan import VQGANSizes
from mixkit.testing.tiny_face_restorers import TINY_CODEFORMER, tiny_face_restorer


def test_packed_attention_equals_torch_multihead_attention():
    """The files were saved from nn.MultiheadAttention: same parameter names, same map."""
    torch.manual_seed(0)
    reference = torch.nn.MultiheadAttention(16, 4).eval()
    ours = PackedSelfAttention(16, 4)
    ours.load_state_dict(reference.state_dict())
    tokens, position = torch.randn(2, 5, 16), torch.randn(5, 16)
    query = (tokens + position).transpose(0, 1)
    expected = reference(query, query, tokens.transpose(0, 1), need_weights=False)[0].transpose(0, 1)
    assert torch.allclose(ours(tokens + position, tokens), expected, atol=1e-6)


def test_adain_gives_content_the_style_statistics():
    torch.manual_seed(1)
    content, style = torch.randn(2, 3, 4, 4) * 3 + 1, torch.randn(2, 3, 4, 4) * 0.5 - 2
    out = adaptive_instance_norm(content, style)
    assert torch.allclose(out.mean(dim=(2, 3)), style.mean(dim=(2, 3)), atol=1e-5)
    assert torch.allclose(out.flatten(2).std(dim=2), style.flatten(2).std(dim=2), atol=1e-4)


def test_released_parameter_count():
    """codeformer.pth (v0.1.0) holds 94,112,707 values; built on the meta device, nothing is allocated."""
    with torch.device("meta"):
        model = CodeFormer(CodeFormerConfig())
    assert sum(parameter.numel() for parameter in model.parameters()) == 94_112_707


def test_fidelity_changes_the_output_and_zero_skips_the_fusion():
    model = tiny_face_restorer(TINY_CODEFORMER)
    faces = torch.rand(1, 3, 64, 64) * 2 - 1
    restored, faithful, default = model(faces, 0.0), model(faces, 1.0), model(faces)
    assert (restored - faithful).abs().max() > 1e-3
    assert torch.equal(default, model(faces, 0.5))
    for block in model.fuse_convs_dict.values():  # w = 0 never runs a CFT block: breaking them changes nothing
        block.scale[0].weight.data.fill_(float("nan"))
    assert torch.equal(model(faces, 0.0), restored)


@pytest.mark.parametrize("weight, error", [(-0.1, ValueError), (1.5, ValueError), (True, TypeError), ("0.5", TypeError)])
def test_fidelity_is_validated(weight, error):
    model = tiny_face_restorer(TINY_CODEFORMER)
    with pytest.raises(error, match="weight"):
        model(torch.zeros(1, 3, 64, 64), weight)


def test_connect_list_must_name_level_resolutions():
    with pytest.raises(ValueError, match="connect_list"):
        CodeFormerConfig(connect_list=(24,))
    sizes = VQGANSizes(base_channels=32, channel_multipliers=(1, 2), res_blocks=1, code_dim=8, image_size=32)
    assert CodeFormerConfig(dim_embd=8, connect_list=(16, 32), vqgan=sizes).latent_tokens == 256
