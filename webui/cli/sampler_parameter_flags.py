"""`mixkit generate` flags for A1111's Sampler parameters (pipelines.sampler_parameters), and their infotext keys."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from pipelines.infotext_values import as_flag, as_number
from pipelines.sampler_parameters import FLAGS, INFOTEXT_KEYS, OPTION_NAMES, SamplerParameters

HELP = {
    "sigma_min": "A1111's 'Schedule min sigma': the lowest sigma of Karras, Exponential, Polyexponential, SGM Uniform, "
                 "KL Optimal, Normal and Beta schedules (default 0: the model's)",
    "sigma_max": "A1111's 'Schedule max sigma': their highest sigma (default 0: the model's)",
    "rho": "A1111's 'Schedule rho' for Karras (own: 7) and Polyexponential (own: 1); default 0: the schedule's own",
    "s_churn": "A1111's 'Sigma churn' for Euler, Heun and DPM2 (k-diffusion's s_churn; default 0: none)",
    "s_tmin": "A1111's 'Sigma tmin': churn only at sigmas >= it (default 0)",
    "s_tmax": "A1111's 'Sigma tmax': churn only at sigmas <= it (default 0: infinity)",
    "s_noise": "A1111's 'Sigma noise': scale of the churn noise (default 1)",
}


def add_sampler_parameter_flags(parser: argparse.ArgumentParser) -> None:
    """--sigma-min, --sigma-max, --rho, --s-churn, --s-tmin, --s-tmax, --s-noise, --always-discard-next-to-last-sigma."""
    for name, text in HELP.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=float, default=None, dest=name, metavar="X", help=text)
    parser.add_argument("--always-discard-next-to-last-sigma", action="store_true", default=None,
                        dest="always_discard_next_to_last_sigma",
                        help="A1111's 'Discard penultimate sigma' for every k-diffusion sampler (DPM2 and DPM2 a always do)")
    parser.add_argument("--sgm-noise-multiplier", action="store_true", default=None, dest="sgm_noise_multiplier",
                        help="A1111's 'SGM noise multiplier': start from noise of std sqrt(1 + sigma_max^2) instead of "
                             "sigma_max (k-diffusion samplers; not DDIM, PLMS, UniPC)")


def sampler_parameters_of(args: argparse.Namespace) -> SamplerParameters:
    """The flags given (or taken from --infotext), the rest at their defaults."""
    given = {name: getattr(args, name) for name in OPTION_NAMES if getattr(args, name, None) is not None}
    return SamplerParameters(**given)


# argparse destination -> (infotext key, conversion), for `generate_infotext.FLAG_KEYS`
INFOTEXT_FLAG_KEYS: dict[str, tuple[str, Callable[[object], Any]]] = {
    name: (key, as_flag if name in FLAGS else as_number)
    for name, key in INFOTEXT_KEYS.items()
}
