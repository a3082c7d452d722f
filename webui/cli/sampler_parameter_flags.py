"""`mixkit generate` flags for A1111's Sampler parameters (pipelines.sampler_parameters), and their infotext keys."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from pipelines.infotext_values import as_flag, as_integer, as_number, as_text
from pipelines.sampler_parameters import CHOICES, FLAGS, INFOTEXT_KEYS, INTEGERS, OPTION_NAMES, SamplerParameters

HELP = {
    "sigma_min": "A1111's 'Schedule min sigma': the lowest sigma of Karras, Exponential, Polyexponential, SGM Uniform, "
                 "KL Optimal, Normal and Beta schedules (default 0: the model's)",
    "sigma_max": "A1111's 'Schedule max sigma': their highest sigma (default 0: the model's)",
    "rho": "A1111's 'Schedule rho' for Karras (own: 7) and Polyexponential (own: 1); default 0: the schedule's own",
    "s_churn": "A1111's 'Sigma churn' for Euler, Heun and DPM2 (k-diffusion's s_churn; default 0: none)",
    "s_tmin": "A1111's 'Sigma tmin': churn only at sigmas >= it (default 0)",
    "s_tmax": "A1111's 'Sigma tmax': churn only at sigmas <= it (default 0: infinity)",
    "s_noise": "A1111's 'Sigma noise': scale of the churn noise (default 1)",
    "beta_dist_alpha": "A1111's 'Beta schedule alpha': the Beta schedule's alpha (default 0.6)",
    "beta_dist_beta": "A1111's 'Beta schedule beta': the Beta schedule's beta (default 0.6)",
}
# store_true flags: option -> help
SWITCHES = {
    "always_discard_next_to_last_sigma": "A1111's 'Discard penultimate sigma' for every k-diffusion sampler (DPM2 and "
                                         "DPM2 a always do)",
    "sgm_noise_multiplier": "A1111's 'SGM noise multiplier': start from noise of std sqrt(1 + sigma_max^2) instead of "
                            "sigma_max (k-diffusion samplers; not DDIM, PLMS, UniPC)",
    "pad_cond_uncond": "A1111's 'Pad conds': pad a prompt and negative prompt of different lengths with the empty "
                       "prompt to one length (one UNet call; changes the image)",
    "pad_cond_uncond_v0": "A1111's 'Pad conds v0': repeat the negative prompt's last vector up to the prompt's length, "
                          "or cut it to it (wins over --pad-cond-uncond)",
    "use_downcasted_alpha_bar": "A1111's 'Downcast alphas_cumprod': round the model's alphas_cumprod to fp16 before "
                                "sampling, as A1111 before 1.8",
}


def add_sampler_parameter_flags(parser: argparse.ArgumentParser) -> None:
    """--sigma-min, --sigma-max, --rho, --s-churn, --s-tmin, --s-tmax, --s-noise, --beta-dist-alpha/-beta, the UniPC
    options, --sd-noise-schedule and the switches (--always-discard-next-to-last-sigma, --pad-cond-uncond ...)."""
    for name, text in HELP.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=float, default=None, dest=name, metavar="X", help=text)
    for name, text in SWITCHES.items():
        parser.add_argument(f"--{name.replace('_', '-')}", action="store_true", default=None, dest=name, help=text)
    parser.add_argument("--uni-pc-variant", choices=CHOICES["uni_pc_variant"], default=None, dest="uni_pc_variant",
                        help="A1111's 'UniPC variant' (default bh1)")
    parser.add_argument("--uni-pc-skip-type", choices=CHOICES["uni_pc_skip_type"], default=None,
                        dest="uni_pc_skip_type", help="A1111's 'UniPC skip type': how UniPC spaces its steps in time "
                                                      "(default time_uniform)")
    parser.add_argument("--uni-pc-order", type=int, default=None, dest="uni_pc_order", metavar="N",
                        help="A1111's 'UniPC order' (default 3; below the sampling steps)")
    parser.add_argument("--uni-pc-lower-order-final", action=argparse.BooleanOptionalAction, default=None,
                        dest="uni_pc_lower_order_final",
                        help="A1111's 'UniPC lower order final': lower UniPC's order over its last steps (default on)")
    parser.add_argument("--sd-noise-schedule", choices=CHOICES["sd_noise_schedule"], default=None,
                        dest="sd_noise_schedule", help="A1111's 'Noise schedule for sampling': 'Zero Terminal SNR' "
                                                       "rescales the model's alphas_cumprod (for models trained so)")


def sampler_parameters_of(args: argparse.Namespace) -> SamplerParameters:
    """The flags given (or taken from --infotext), the rest at their defaults."""
    given = {name: getattr(args, name) for name in OPTION_NAMES if getattr(args, name, None) is not None}
    return SamplerParameters(**given)


# argparse destination -> (infotext key, conversion), for `generate_infotext.FLAG_KEYS`
INFOTEXT_FLAG_KEYS: dict[str, tuple[str, Callable[[object], Any]]] = {
    name: (key, as_flag if name in FLAGS else as_text if name in CHOICES else as_integer if name in INTEGERS
           else as_number)
    for name, key in INFOTEXT_KEYS.items()
}
