"""uni_pc's "vary_coeff" variant (A1111's `uni_pc_variant` third choice), which diffusers' UniPC class lacks.

Where bh1/bh2 fix B(h) and solve for the update's coefficients, vary_coeff (Zhao et al. 2023, UniPC, Sec. 3.3's
"varying coefficients") inverts the K x K matrix C[i][k] = r_i^k / (k + 1)! of the step ratios r_i (the last 1)
and weighs the scaled differences D_i = (m_i - m_0) / r_i with the phi functions of h:
    x_t = sigma_t / sigma_s * x - alpha_t (e^-h - 1) m_0 - alpha_t sum_k phi_{k+1}(h) (C^-1 D)_k.
The predictor uses C without its last row and column; the corrector all of C with the model output at the
predicted x_t as the last difference. As in uni_pc (and so in A1111), the corrector weighs that last difference
with row K - 2 of C^-1 (row 0 when K = 1), the row its loop variable is left at. Data prediction only (A1111's).
"""

from __future__ import annotations

import torch


def vary_coeff_update(x, model_prev_0, differences: list, rks: torch.Tensor, h, alpha_t, sigma_t, sigma_prev_0,
                      model_t=None):
    """One vary_coeff step from x (at the previous time) to t: the predictor, or with `model_t` the corrector.

    `differences` are (m_i - m_0) / r_i for the earlier model outputs m_i, `rks` the ratios r_i plus a final 1.
    """
    count = len(rks)
    columns, column = [], torch.ones_like(rks)
    for k in range(1, count + 1):
        columns.append(column)
        column = column * rks / (k + 1)
    matrix = torch.stack(columns, dim=1)
    hh = -h
    phis, phi, factorial = [], torch.expm1(hh), 1
    for k in range(1, count + 2):
        phis.append(phi)
        phi = phi / hh - 1 / factorial
        factorial *= k + 1
    base = sigma_t / sigma_prev_0 * x - alpha_t * phis[0] * model_prev_0
    stacked = torch.stack(differences, dim=1) if differences else None
    if model_t is None:
        result = base
        if stacked is not None:
            weights = torch.linalg.inv(matrix[:-1, :-1])
            for k in range(count - 1):
                result = result - alpha_t * phis[k + 1] * torch.einsum("bkchw,k->bchw", stacked, weights[k])
        return result
    weights = torch.linalg.inv(matrix)
    result, row = base, 0
    for row in range(count - 1):
        result = result - alpha_t * phis[row + 1] * torch.einsum("bkchw,k->bchw", stacked, weights[row][:-1])
    return result - alpha_t * phis[count] * ((model_t - model_prev_0) * weights[row][-1])
