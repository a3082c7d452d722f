"""Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"), kohya's `optimizer_type="Lion"`.

Why people pick it for LoRAs: one moment instead of Adam's two (half the optimizer memory), and every
weight moves by exactly the rate each step (the update is a sign), so small adapters start moving at
once. The sign makes the step about 10x larger than Adam's at the same rate: use a 3-10x lower
learning rate (and, by the paper, a correspondingly larger weight decay, since the decay is scaled
by the rate too). Implemented with torch's multi-tensor (`_foreach_`) ops, one call per step for all
tensors of a group, as the fused AdamW does; `lion-pytorch` (kohya's choice) is the test oracle.
"""

from __future__ import annotations

import torch


class Lion(torch.optim.Optimizer):
    """p <- p (1 - lr wd) - lr sign(b1 m + (1 - b1) g);  m <- b2 m + (1 - b2) g."""

    def __init__(self, params, lr: float = 1e-4, betas: tuple[float, float] = (0.9, 0.99),
                 weight_decay: float = 0.0) -> None:
        if not 0.0 < lr < float("inf"):
            raise ValueError(f"Lion needs a positive learning rate, got {lr!r}")
        if not all(0.0 <= beta < 1.0 for beta in betas) or len(betas) != 2:
            raise ValueError(f"Lion's betas must be two numbers in [0, 1), got {betas!r}")
        if not 0.0 <= weight_decay < float("inf"):
            raise ValueError(f"Lion's weight_decay must be >= 0, got {weight_decay!r}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            moments = [self.state[p].setdefault("exp_avg", torch.zeros_like(p)) for p in params]
            lr, (beta1, beta2), decay = group["lr"], group["betas"], group["weight_decay"]
            if decay:
                torch._foreach_mul_(params, 1.0 - lr * decay)
            update = torch._foreach_mul(moments, beta1)
            torch._foreach_add_(update, grads, alpha=1.0 - beta1)
            torch._foreach_sign_(update)
            torch._foreach_add_(params, update, alpha=-lr)
            torch._foreach_mul_(moments, beta2)
            torch._foreach_add_(moments, grads, alpha=1.0 - beta2)
        return loss
