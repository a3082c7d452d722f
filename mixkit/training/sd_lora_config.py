"""Settings of a Stable Diffusion LoRA / LoCon run, as a typed dataclass that round-trips to JSON."""

from __future__ import annotations

from dataclasses import dataclass, field

from mixkit.registry import Registry
from mixkit.training.config_checks import check_bools, check_ema_decay, check_number_in, check_optional_strings
from mixkit.training.config_json import JsonConfig
from mixkit.training.kohya_export import SAVE_PRECISIONS, SDXL_KEY_LAYOUTS
from mixkit.training.modelspec import METADATA_TEXTS
from mixkit.training.sd_run_options import SDRunOptions
from mixkit.training.word_vectors import check_words

NETWORK_KINDS: Registry[str] = Registry("network kind")
NETWORK_KINDS.register("lora", "LoRA on attention/MLP linears and 1x1 convs (kohya networks.lora)")
NETWORK_KINDS.register("locon", "LoRA plus ResNet/down/upsample 3x3 convs (kohya conv_dim, LyCORIS LoCon)")
NETWORK_KINDS.register("cross-kv", "LoRA on the cross-attention key/value projections only (Custom Diffusion's "
                                     "choice of layers: where text states enter the UNet)")

PRIOR_TARGETS: Registry[str] = Registry("prior-preservation target")
PRIOR_TARGETS.register("noise", "class images are denoised towards their true noise, as DreamBooth and kohya do")
PRIOR_TARGETS.register("base_model", "class images are denoised towards the base model's own prediction (adapters "
                                     "off): the LoRA is taught to leave what the base model draws unchanged, "
                                     "not to redraw the class images")


LORAPLUS_RATIOS = ("loraplus_lr_ratio", "loraplus_unet_lr_ratio", "loraplus_text_encoder_lr_ratio")


@dataclass
class SDLoraTrainingConfig(SDRunOptions, JsonConfig):
    """Everything that decides the result of a run; saved next to the output so it can be repeated.

    `sdxl_key_layout` names SDXL UNet modules as kohya's SDXL trainer does ("sgm", what A1111, ComfyUI
    and Civitai files use) or by flattened diffusers paths ("diffusers"); SD 1.x/2.x files always use
    the latter, as kohya's do. Data, batch and step settings, optimizer, validation and logging options come from
    `SDRunOptions`.
    """

    model: str
    dataset: str
    output: str
    network: str = "lora"
    rank: int = 4
    # The adapters' output is scaled by alpha / rank; 0 means alpha = rank (scale 1), as in kohya, whose files then
    # store the rank as `.alpha` (so A1111 and every loader apply the scale the run trained with).
    alpha: float = 1.0
    # The 3x3 convolutions' rank and alpha (LoCon, or a LyCORIS preset that adapts them); conv_alpha 0 means
    # conv_alpha = conv_rank, as kohya's. None: the linear layers' rank / alpha, LyCORIS's default when network_args
    # has no conv_dim / conv_alpha; conv_rank 0 with a LyCORIS preset: no 3x3 convolution (its conv_dim=0).
    conv_rank: int | None = 4
    conv_alpha: float | None = 1.0
    # LyCORIS's layer preset (kohya network_module "lycoris.kohya", network_args "preset=..."): which layers are
    # adapted (`lycoris_presets.LYCORIS_PRESETS`: full, attn-mlp, unet-transformer-only ...), `network` then being
    # LyCORIS's algo ("lora" and "locon" are one algorithm there). None: kohya networks.lora's layers by `network`.
    lycoris_preset: str | None = None
    # DoRA (weight-decomposed LoRA, LyCORIS's network_args "dora_wd=True"): each adapted weight is re-normalised per
    # output row and scaled by a trained magnitude, saved as `<module>.dora_scale` beside lora_down / lora_up / alpha.
    dora_wd: bool = False
    # How the adapters start (peft's init_lora_weights): "kaiming" is kohya's (random down, zero up); "pissa" starts
    # them as each layer's top singular directions, the base layer holding the rest (PiSSA, Meng et al. 2024), so no
    # random draw decides the start. The file is an ordinary Kohya LoRA of the run's change, at twice the rank
    # (`mixkit.training.pissa`). Not with DoRA, dropouts, scale_weight_norms or network_weights.
    init_lora_weights: str = "kaiming"
    train_text_encoder: bool = False
    # False trains the text encoder's adapters alone (kohya's network_train_text_encoder_only): no UNet adapters are
    # created, so the file holds `lora_te*` modules only. Needs train_text_encoder.
    train_unet: bool = True
    class_dataset: str | None = None
    prior_loss_weight: float = 1.0
    prior_target: str = "noise"
    # kohya's rule (True): an epoch holds as many class samples as training samples, so the class images are repeated
    # or cut to that count (`mixkit.data.class_balance`) and half of each batch is class images. False takes them as
    # given (each with its folder's repeats), so the two folders' sizes set the share: a recipe that wants two thirds
    # of each batch on the concept (1200 concept images against 600 class images) needs it.
    balance_class_images: bool = True
    # kohya's three rates: learning_rate is the base, unet_learning_rate (kohya's unet_lr) and
    # text_encoder_learning_rate (text_encoder_lr) each part's own when given (None: the base). The file records them
    # as given (ss_learning_rate, ss_unet_lr, ss_text_encoder_lr), as kohya does.
    learning_rate: float = 1e-4
    unet_learning_rate: float | None = None
    text_encoder_learning_rate: float | None = None
    # Words (a new concept's trigger words) whose input vectors are trained too and saved in the file as A1111
    # bundled embeddings (pivotal tuning), at `word_vectors_learning_rate` (None: the text-encoder rate).
    train_word_vectors: list[str] = field(default_factory=list)
    word_vectors_learning_rate: float | None = None
    # LoRA+ (kohya's loraplus_lr_ratio): the adapters' up weights learn at this multiple of their rate. The UNet's and
    # the text encoder's adapters may have their own (kohya's loraplus_unet_lr_ratio / loraplus_text_encoder_lr_ratio,
    # each falling back to loraplus_lr_ratio; a part with neither trains without LoRA+).
    loraplus_lr_ratio: float | None = None
    loraplus_unet_lr_ratio: float | None = None
    loraplus_text_encoder_lr_ratio: float | None = None
    mixed_precision: str = "auto"  # bf16 where it is fast (measured 1.7x over fp32 at SD 1.5 size), else fp32
    output_name: str | None = None
    sdxl_key_layout: str = "sgm"
    # Export an exponential moving average of the adapters (and word vectors) instead of the last step's
    # weights: with a constant rate the last step is one noisy point around where a finished run has
    # settled. A run still learning at its last step is better exported as is (the average lags; measured
    # on the tiny heart LoRA, README). Off by default, as kohya has no EMA for networks.
    use_ema: bool = False
    ema_decay: float = 0.99
    # kohya's LoRA regularisers (network_dropout; rank_dropout and module_dropout of --network_args): dropout of the
    # adapters' rank-wide hidden values, of whole rank channels per sample, of whole adapters per step. 0: off.
    network_dropout: float = 0.0
    rank_dropout: float = 0.0
    module_dropout: float = 0.0
    # Max-norm regularisation (kohya's scale_weight_norms, 1.0 is common): after every step each adapter's weight
    # change alpha/rank * up @ down is scaled back to this Frobenius norm if longer, so no layer "overcooks". None: off.
    scale_weight_norms: float | None = None
    # Start from an existing kohya LoRA file's adapters (kohya's --network_weights): its rank and alpha must be this
    # run's; modules it lacks start fresh (`network_weights`). Unlike resume_from, the schedule starts anew.
    network_weights: str | None = None
    # The file's tensor precision (kohya's save_precision): "float" (float32), or "fp16" / "bf16" for half-size files
    # (what most shared LoRAs are; the loaders compute in the model's dtype either way). Alphas stay exact in each.
    save_precision: str = "float"
    # Free text recorded as ss_training_comment (kohya's training_comment): trigger words, licence, where it came from.
    training_comment: str = ""
    # The SAI model spec's texts (kohya's --metadata_title / _author / _description / _license / _tags), shown by
    # UIs that read `modelspec.*`; the title defaults to the output name, as kohya's does.
    metadata_title: str | None = None
    metadata_author: str | None = None
    metadata_description: str | None = None
    metadata_license: str | None = None
    metadata_tags: str | None = None
    # kohya's --no_metadata: the file keeps only what a loader needs (network module, dim, alpha, args, base model
    # version, SAI modelspec) and the sshs hashes; no dataset folders, tags, settings, times or training config.
    no_metadata: bool = False

    def conv_layers(self) -> tuple[int | None, float | None]:
        """(rank, alpha) of the adapted 3x3 convolutions, rank None when the network adapts none: LoCon's, or with a
        LyCORIS preset that enables convolutions its conv_dim / conv_alpha, the linear layers' where None (LyCORIS's
        create_network: conv_dim defaults to network_dim, conv_alpha to network_alpha)."""
        from mixkit.training.lycoris_presets import LYCORIS_PRESETS

        convs = (LYCORIS_PRESETS.get(self.lycoris_preset).convs if self.lycoris_preset is not None
                 else self.network == "locon")
        if not convs or self.conv_rank == 0:  # 0: LyCORIS's conv_dim=0, no 3x3 convolution
            return None, self.conv_alpha
        return (self.rank if self.conv_rank is None else self.conv_rank,
                self.alpha if self.conv_alpha is None else self.conv_alpha)

    def loraplus_ratios(self) -> tuple[float | None, float | None]:
        """(UNet, text encoder) LoRA+ ratios as kohya's networks/lora.py takes them: the part's own, else the shared
        loraplus_lr_ratio (None: that part's up weights learn at its plain rate)."""
        return (self.loraplus_unet_lr_ratio or self.loraplus_lr_ratio,
                self.loraplus_text_encoder_lr_ratio or self.loraplus_lr_ratio)

    def part_learning_rates(self) -> tuple[float, float]:
        """(UNet, text encoder) adapters' rates: each part's own, else learning_rate (as kohya's
        prepare_optimizer_params)."""
        return tuple(self.learning_rate if rate is None else rate
                     for rate in (self.unet_learning_rate, self.text_encoder_learning_rate))

    def check(self) -> None:
        """Raise ValueError naming the first setting out of range."""
        self.check_sd_training(positive_ints=("rank",),
                               non_negative=("unet_learning_rate", "text_encoder_learning_rate",
                                             "word_vectors_learning_rate", "alpha",
                                             "conv_alpha", "prior_loss_weight"))
        NETWORK_KINDS.get(self.network)
        PRIOR_TARGETS.get(self.prior_target)
        SDXL_KEY_LAYOUTS.get(self.sdxl_key_layout)
        from mixkit.training.dataset_config import is_dataset_config

        # A dataset config's class images are its is_reg subsets, found when it is read (`check_prior_images`).
        if self.prior_target != "noise" and not self.class_dataset and not is_dataset_config(self.dataset):
            raise ValueError(f"prior_target={self.prior_target!r} acts on class images; set class_dataset "
                             "(a folder or manifest of base-world images), or use a kohya dataset config with an "
                             "is_reg = true subset, or leave prior_target='noise'")

        if is_dataset_config(self.dataset) and self.class_dataset:
            raise ValueError(f"class_dataset {self.class_dataset!r} and a kohya dataset config ({self.dataset!r}) are "
                             "both given; as kohya ignores reg_data_dir then, add the class images to the config as "
                             "a subset with is_reg = true, and remove class_dataset")
        lowest = 0 if self.lycoris_preset is not None else 1  # LyCORIS's conv_dim=0 turns its convolutions off
        if self.conv_rank is not None and (isinstance(self.conv_rank, bool) or not isinstance(self.conv_rank, int)
                                           or self.conv_rank < lowest):
            raise ValueError(f"conv_rank must be a {'non-negative' if lowest == 0 else 'positive'} integer (the 3x3 "
                             "convolutions' rank; 0 with a LyCORIS preset: none adapted), or None for the rank of the "
                             f"linear layers, got {self.conv_rank!r}")
        self._check_lycoris_preset()
        check_words(self.train_word_vectors)
        check_bools(self, ("train_unet", "train_text_encoder", "balance_class_images", "dora_wd"))
        if not self.train_unet:
            if not self.train_text_encoder:
                raise ValueError("train_unet=false and train_text_encoder=false leave no adapters to train (kohya's "
                                 "network_train_text_encoder_only and network_train_unet_only together); set "
                                 "train_text_encoder: true to train the text encoder's adapters alone")
            if self.network != "lora" and self.lycoris_preset is None:
                raise ValueError(f"network={self.network!r} chooses UNet layers, but train_unet=false (kohya's "
                                 "network_train_text_encoder_only) creates no UNet adapters; use network: lora "
                                 "(and no network_args conv_dim)")
        for name in LORAPLUS_RATIOS:
            ratio = getattr(self, name)
            if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, (int, float))
                                      or not 0 < ratio < float("inf")):
                raise ValueError(f"{name} must be a positive number (16 is LoRA+'s suggestion) or None, got {ratio!r}")
        check_bools(self, ("no_metadata",))
        if not isinstance(self.use_ema, bool):
            raise TypeError(f"use_ema must be true or false, got {self.use_ema!r}")
        check_ema_decay(self)
        for name in ("network_dropout", "rank_dropout", "module_dropout"):
            check_number_in(self, name, "[0, 1)", "(a probability; 0.1 is usual, 0: off)")
        SAVE_PRECISIONS.get(self.save_precision)
        if not isinstance(self.training_comment, str):
            raise ValueError(f"training_comment must be a string, got {self.training_comment!r}")
        check_optional_strings(self, METADATA_TEXTS)
        if self.network_weights is not None and (not isinstance(self.network_weights, str)
                                                 or not self.network_weights.strip()):
            raise ValueError(f"network_weights must be the path of a kohya LoRA file or None, got {self.network_weights!r}")
        if self.scale_weight_norms is not None:
            check_number_in(self, "scale_weight_norms", "(0, inf)", "(1.0 is common; None: off)")
        self._check_init_lora_weights()

    def _check_init_lora_weights(self) -> None:
        """PiSSA's adapters carry the layer's principal part: what drops, re-normalises or bounds an adapter, or
        starts it from a file, would change the base model itself."""
        from mixkit.training.pissa import LORA_INITIALISATIONS, PISSA

        if self.init_lora_weights not in LORA_INITIALISATIONS:
            raise ValueError(f"init_lora_weights must be one of {list(LORA_INITIALISATIONS)} (kaiming: kohya's random "
                             "down and zero up; pissa: the layers' principal components), got "
                             f"{self.init_lora_weights!r}")
        if self.init_lora_weights != PISSA:
            return
        clashes = [name for name, on in (("dora_wd", self.dora_wd), ("network_dropout", self.network_dropout),
                                         ("rank_dropout", self.rank_dropout), ("module_dropout", self.module_dropout),
                                         ("scale_weight_norms", self.scale_weight_norms is not None),
                                         ("network_weights", self.network_weights is not None)) if on]
        if clashes:
            raise ValueError(f"init_lora_weights='pissa' cannot be combined with {', '.join(clashes)}: a PiSSA "
                             "adapter holds the layer's principal part, so dropping, re-normalising or bounding it (or "
                             "starting it from a file) would change the base model; remove those settings or use "
                             "init_lora_weights='kaiming'")

    def _check_lycoris_preset(self) -> None:
        """A LyCORIS preset chooses the layers itself: `network` is then LyCORIS's algo (lora or locon), and the preset
        must leave something to train with train_unet / train_text_encoder."""
        if self.lycoris_preset is None:
            return
        from mixkit.training.lycoris_presets import LYCORIS_PRESETS

        if self.lycoris_preset not in LYCORIS_PRESETS:
            raise ValueError(f"lycoris_preset {self.lycoris_preset!r} is not a LyCORIS preset mixkit can build; use one "
                             f"of {LYCORIS_PRESETS.names()} or None (kohya networks.lora's layers)")
        if self.network not in ("lora", "locon"):
            raise ValueError(f"network={self.network!r} chooses its own layers, and lycoris_preset="
                             f"{self.lycoris_preset!r} chooses others; with a LyCORIS preset network is its algo, "
                             "'lora' or 'locon' (one algorithm in LyCORIS)")
        preset = LYCORIS_PRESETS.get(self.lycoris_preset)
        if self.train_text_encoder and not preset.adapts_text_encoder:
            raise ValueError(f"lycoris_preset={self.lycoris_preset!r} adapts no text-encoder layer, but "
                             "train_text_encoder is true; set train_text_encoder: false (kohya's "
                             "network_train_unet_only = true) or choose a preset with the text encoder (full, "
                             "attn-mlp, attn-only, full-lin)")
