"""mixkit's "adamw" is torch's fused AdamW where it can be: the same steps as the per-parameter loop, one kernel."""

from __future__ import annotations

import torch

from mixkit.training.optimizers import make_optimizer


def test_adamw_is_fused_on_cpu_and_steps_as_torch_s_loop_does():
    torch.manual_seed(0)
    starts = [torch.randn(8, 16), torch.randn(16)]
    grads = [[torch.randn_like(s) for s in starts] for _ in range(4)]
    results = {}
    for name, make in [("mixkit", lambda ps: make_optimizer("adamw", [{"params": iter(ps[:1]), "lr": 1e-2},
                                                                     {"params": ps[1:]}], 3e-2)),
                       ("torch loop", lambda ps: torch.optim.AdamW([{"params": ps[:1], "lr": 1e-2}, {"params": ps[1:]}],
                                                                   lr=3e-2, weight_decay=1e-2, foreach=False))]:
        params = [torch.nn.Parameter(s.clone()) for s in starts]
        optimizer = make(params)
        for step in grads:
            for p, g in zip(params, step):
                p.grad = g.clone()
            optimizer.step()
        results[name] = params
        if name == "mixkit":
            assert optimizer.defaults["fused"] is True
            assert [len(g["params"]) for g in optimizer.param_groups] == [1, 1]  # a generator's parameters kept
    for fused, loop, start in zip(results["mixkit"], results["torch loop"], starts):
        assert not torch.equal(fused, start)
        torch.testing.assert_close(fused, loop, rtol=1e-6, atol=1e-6)


def test_adamw_falls_back_to_torch_s_choice_where_no_fused_kernel_exists():
    # The fused kernel runs on CPU and CUDA only; elsewhere (here: the meta device) torch picks as before.
    weight = torch.nn.Parameter(torch.zeros(3, device="meta"))
    assert make_optimizer("adamw", [{"params": [weight]}], 1e-3).defaults["fused"] is None
