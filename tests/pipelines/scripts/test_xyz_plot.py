"""X/Y/Z plot end to end on the tiny SD 1.x model (pipelines/scripts/xyz_plot.py)."""

from dataclasses import replace

import pytest

from pipelines.control import GenerationControl
from pipelines.infotext import parse_infotext
from pipelines.params import Txt2ImgParams
from pipelines.scripts import xyz_plot
from pipelines.scripts.xyz_axes import PlotContext

from .keeps_copies import KeepsCopies

TINY = dict(prompt="a red cat", width=64, height=64, steps=1, seed=5, sampler="Euler")


def test_plan_order_puts_the_checkpoint_axis_outermost():
    names = ["a.safetensors", "b.safetensors"]
    config = xyz_plot.xyz_config(("Steps", "1,2,3"), ("Checkpoint name", "a,b"),
                                 context={"checkpoint_names": names})
    order = xyz_plot.plan_order(config)
    assert order == [(0, 0, 0), (1, 0, 0), (2, 0, 0), (0, 1, 0), (1, 1, 0), (2, 1, 0)]
    config = xyz_plot.xyz_config(("Checkpoint name", "a,b"), ("Steps", "1,2"), context={"checkpoint_names": names})
    assert xyz_plot.plan_order(config) == [(0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 0)]


def test_cell_params_apply_axes_and_vary_seeds():
    config = xyz_plot.xyz_config(("Seed", "10,20"), ("Prompt S/R", "red,blue"), vary_seeds_y=True)
    params = Txt2ImgParams(**TINY)
    cell = xyz_plot.cell_params(params, config, 1, 1, 0, PlotContext())
    assert (cell.seed, cell.prompt) == (20 + 1 * 1, "a blue cat")
    assert params.prompt == "a red cat" and params.seed == 5


def test_describe_cell_names_a_planned_cell_by_its_axes_values():
    config = xyz_plot.xyz_config(("Steps", "1,2"), ("Prompt S/R", "red,blue"))
    assert [xyz_plot.describe_cell(config, index) for index in range(4)] == [
        "cell Steps: 1, red", "cell Steps: 2, red", "cell Steps: 1, blue", "cell Steps: 2, blue"]
    assert xyz_plot.describe_cell(xyz_plot.xyz_config(("Nothing", "")), 0) == "cell 1"


def test_seed_minus_one_is_drawn_once_unless_kept():
    config = xyz_plot.xyz_config(("Seed", "-1, 7"))
    params, fixed = xyz_plot.fix_seeds(Txt2ImgParams(**{**TINY, "seed": -1}), config)
    assert params.seed != -1 and fixed.x.values[0] != -1 and fixed.x.values[1] == 7
    kept = xyz_plot.xyz_config(("Seed", "-1, 7"), no_fixed_seeds=True)
    assert xyz_plot.fix_seeds(Txt2ImgParams(**TINY), kept)[1].x.values == (-1, 7)


@pytest.mark.parametrize("x, message", [
    (("Prompt S/R", "dog,cat"), "Prompt S/R did not find 'dog'"),
    (("Sampler", "Euler,Nope"), "Sampler 'Nope'"),
    (("Checkpoint name", "a"), "needs a way to load checkpoints"),
    (("Hires steps", "1,2"), "needs hires fix"),
    (("Hires sampler", "Euler"), "X axis 'Hires sampler' needs hires fix"),
    (("Denoising", "0.5"), "needs img2img or hires fix"),
    (("Styles", "x"), "needs a styles file"),
])
def test_check_plot_refuses_before_generating(x, message):
    config = xyz_plot.xyz_config(x)
    with pytest.raises(ValueError, match=message):
        xyz_plot.check_plot(Txt2ImgParams(**TINY), config, PlotContext())


def test_grid_megapixel_cap():
    config = xyz_plot.xyz_config(("Seed", "1-30"), ("Steps", "1-30"))
    with pytest.raises(ValueError, match="more than 200"):
        xyz_plot.check_plot(Txt2ImgParams(**{**TINY, "width": 512, "height": 512}), config, PlotContext())


@pytest.mark.parametrize("x, params", [
    # 100 cells of 8 images of 512x512, each cell their 3x3 grid: 100 x 1536x1536 = 236 MP (26 MP as one per cell)
    (("Seed", "1-100"), dict(width=512, height=512, batch_size=4, batch_count=2)),
    # 51 cells, image_grid draws each at 2048x2048: 214 MP (4.5 MP as a sum of each cell's own size)
    (("Size", "64x2048, 2048x64, 64x64"), dict(width=64, height=64)),
])
def test_grid_megapixel_cap_counts_batches_and_the_largest_cell(x, params):
    y = ("Steps", "1") if x[0] == "Seed" else ("Seed", "1-17")
    config = xyz_plot.xyz_config(x, y)
    with pytest.raises(ValueError, match="more than 200"):
        xyz_plot.check_plot(Txt2ImgParams(**{**TINY, **params}), config, PlotContext())


def test_grid_megapixel_cap_counts_the_hires_size():
    from pipelines.hires import HiresParams

    config = xyz_plot.xyz_config(("Seed", "1-60"))  # 60 x 2048x2048 = 252 MP after hires; 16 MP before
    with pytest.raises(ValueError, match="252 megapixels"):
        xyz_plot.check_plot(HiresParams(**{**TINY, "width": 512, "height": 512}, hr_scale=4.0), config,
                            PlotContext())


def test_plot_runs_every_cell_and_draws_a_labelled_grid(sd1_pipe):
    config = xyz_plot.xyz_config(("Steps", "1,2"), ("CFG Scale", "5,7"), ("Prompt S/R", "red,blue"),
                                 include_lone_images=True, include_sub_grids=True)
    steps = []
    result = xyz_plot.run(sd1_pipe, Txt2ImgParams(**TINY), config,
                          callback=lambda state: steps.append((state.batch_index, state.batch_count)))
    assert result.index_of_first_image == 3  # the main grid, then one sub-grid per Z value
    main, red, blue, *cells = result.images
    assert len(cells) == 8 and all(cell.size == (64, 64) for cell in cells)
    # labels on top and left: each sub-grid is larger than its 2x2 cells
    assert red.width > 128 and red.height > 128 and blue.size == red.size
    assert main.width >= 2 * red.width and main.height > red.height  # Z labels on top of the side-by-side grids
    assert sorted({batch for batch, _ in steps}) == list(range(8)) and {count for _, count in steps} == {8}
    # each cell's infotext is its own image's: x fastest, then y, then z
    read = [parse_infotext(text) for text in result.infotexts[3:]]
    assert [(r["Steps"], r["CFG scale"], r["Prompt"]) for r in read[:3]] == [
        ("1", "5", "a red cat"), ("2", "5", "a red cat"), ("1", "7", "a red cat")]
    assert read[4]["Prompt"] == "a blue cat"
    grid = parse_infotext(result.infotexts[0])
    assert (grid["Script"], grid["X Type"], grid["X Values"], grid["Z Type"]) == ("X/Y/Z plot", "Steps", "1,2",
                                                                                   "Prompt S/R")
    assert "Z Type" not in parse_infotext(result.infotexts[1]) and parse_infotext(result.infotexts[1])["Y Type"]
    assert len(result.samples.images) == 8


def test_plot_without_legend_is_the_bare_grid(sd1_pipe):
    config = xyz_plot.xyz_config(("Seed", "1,2,3"), draw_legend=False)
    result = xyz_plot.run(sd1_pipe, Txt2ImgParams(**TINY), config)
    assert [image.size for image in result.images] == [(192, 64)]
    assert result.index_of_first_image == 1 and len(result.samples.images) == 3
    assert result.samples.seeds == [1, 2, 3]
    assert parse_infotext(result.infotexts[0])["Fixed X Values"] == "1, 2, 3"


def test_margins_add_space_between_cells(sd1_pipe):
    plain = xyz_plot.run(sd1_pipe, Txt2ImgParams(**TINY), xyz_plot.xyz_config(("Seed", "1,2"), ("Steps", "1,2")))
    spaced = xyz_plot.run(sd1_pipe, Txt2ImgParams(**TINY),
                          xyz_plot.xyz_config(("Seed", "1,2"), ("Steps", "1,2"), margin_size=10))
    assert (spaced.images[0].width - plain.images[0].width, spaced.images[0].height - plain.images[0].height) == (10, 10)


def test_interrupt_stops_the_plot_and_leaves_blank_cells(sd1_pipe):
    control = GenerationControl()
    seen = []

    def stop_after_first_cell(state):
        seen.append(state.batch_index)
        control.interrupt()

    config = xyz_plot.xyz_config(("Seed", "1,2,3"), draw_legend=False, include_lone_images=True)
    result = xyz_plot.run(sd1_pipe, Txt2ImgParams(**TINY), config, callback=stop_after_first_cell, control=control)
    assert result.interrupted and seen == [0]
    assert len(result.samples.images) == 1 and result.images[0].size == (192, 64)
    assert result.images[0].crop((64, 0, 192, 64)).getbbox() is None  # black: never generated


def test_checkpoint_axis_switches_once_per_value(sd1_pipe):
    switched = []

    def switch(name):
        switched.append(name)
        return sd1_pipe

    config = xyz_plot.xyz_config(("Seed", "1,2"), ("Checkpoint name", "one, two"),
                                 context={"checkpoint_names": ["one", "two"], "switch_checkpoint": switch})
    result = xyz_plot.run(sd1_pipe, Txt2ImgParams(**TINY), config, switch_checkpoint=switch,
                          checkpoint_names=["one", "two"])
    assert switched == ["one", "two"] and len(result.samples.images) == 4


def test_a_checkpoint_that_fails_to_load_mid_plot_is_named(sd1_pipe):
    def switch(name):
        if name == "two":
            raise FileNotFoundError(2, "No such file or directory", "/models/two.safetensors")
        return sd1_pipe

    context = {"checkpoint_names": ["one", "two"], "switch_checkpoint": switch}
    config = xyz_plot.xyz_config(("Checkpoint name", "one, two"), context=context)
    with pytest.raises(ValueError, match=r"stopped at cell 2 of 2 \(two\): the Checkpoint name axis could not load "
                                         r"'two' \(.*No such file or directory.*\); was it removed"):
        xyz_plot.run(sd1_pipe, Txt2ImgParams(**TINY), config, **context)


def test_a_bad_cell_fails_before_any_generation(sd1_pipe):
    calls = []
    config = xyz_plot.xyz_config(("Steps", "1, 5000"))
    with pytest.raises(ValueError, match="steps"):
        xyz_plot.run(sd1_pipe, replace(Txt2ImgParams(**TINY)), config, callback=lambda state: calls.append(state))
    assert calls == []


def test_skip_ends_the_current_cell_and_the_plot_goes_on(sd1_pipe):
    control = GenerationControl()
    calls = []

    def skip_first_cell(state):
        calls.append((state.batch_index, state.step))
        if state.batch_index == 0:
            control.skip()

    config = xyz_plot.xyz_config(("Seed", "1,2,3"), draw_legend=False)
    result = xyz_plot.run(sd1_pipe, Txt2ImgParams(**{**TINY, "steps": 3}), config, callback=skip_first_cell,
                          control=control)
    assert not result.interrupted and len(result.samples.images) == 3
    assert [step for batch, step in calls if batch == 0] == [1]  # skipped after its first step
    assert [step for batch, step in calls if batch == 2] == [1, 2, 3]


def test_a_cell_of_a_batch_shows_the_batch_grid(sd1_pipe):
    config = xyz_plot.xyz_config(("Seed", "1,2"), draw_legend=False, include_lone_images=True)
    result = xyz_plot.run(sd1_pipe, Txt2ImgParams(**{**TINY, "batch_size": 2}), config)
    assert result.images[0].size == (256, 64)  # two cells, each its 2-image batch side by side
    assert len(result.images) == 5 and result.samples.seeds == [1, 2, 2, 3]


def test_hires_axes_reach_the_second_pass(sd1_pipe):
    from pipelines.hires import HiresFix, HiresParams

    config = xyz_plot.xyz_config(("Hires steps", "1,2"), ("Denoising", "0.3,0.6"), draw_legend=False)
    params = HiresParams(**TINY, hr_scale=1.5, hr_upscaler="Latent")
    result = xyz_plot.run(HiresFix(sd1_pipe), params, config)
    read = [parse_infotext(text) for text in result.samples.infotexts]
    assert [(r["Hires steps"], r["Denoising strength"]) for r in read] == [
        ("1", "0.3"), ("2", "0.3"), ("1", "0.6"), ("2", "0.6")]
    assert result.images[0].size == (2 * 96, 2 * 96)


def test_the_hires_sampler_axis_runs_each_cells_second_pass_with_its_sampler(sd1_pipe):
    # A1111's "Hires sampler" axis: index 10 of txt2img's list, values parsed as sampler names, label "Hires sampler: X"
    from pipelines.hires import HiresFix, HiresParams
    from pipelines.scripts.xyz_config import parse_script_args

    config = parse_script_args([10, "Use same sampler, DPM++ 2M", [], 0, "", []], "txt2img")
    assert (config.x.label, config.x.values) == ("Hires sampler", ("Use same sampler", "DPM++ 2M"))
    params = HiresParams(**TINY, hr_scale=1.5, hr_upscaler="Latent", hr_second_pass_steps=2)
    result = xyz_plot.run(HiresFix(sd1_pipe), params, xyz_plot.xyz_config(("Hires sampler", "Use same sampler, DPM++ 2M"),
                                                                         draw_legend=False))
    read = [parse_infotext(text) for text in result.samples.infotexts]
    assert [r["Hires sampler"] for r in read] == ["Use same sampler", "DPM++ 2M"]  # the first: no key written
    own = [HiresFix(sd1_pipe)(params), HiresFix(sd1_pipe)(replace(params, hr_sampler="DPM++ 2M"))]
    assert [image.tobytes() for image in result.samples.images] == [r.images[0].tobytes() for r in own]
    assert result.samples.infotexts == [r.infotexts[0] for r in own]
    with pytest.raises(ValueError, match="X axis: Hires sampler 'Nope': .*Unknown sampler"):
        xyz_plot.check_plot(params, xyz_plot.xyz_config(("Hires sampler", "Euler,Nope")), PlotContext())


def test_hires_sampler_cells_take_their_kinds_settings_eta(sd1_pipe):
    """A1111's hires sampler reads `p.eta`, else its own kind's Settings eta, per cell: with Settings eta_ddim 0.25
    and eta_ancestral 0.75 (the request sent no eta), a DDIM cell runs and writes eta 0.25, an Euler a cell 0.75."""
    from pipelines.hires import HiresFix, HiresParams
    from pipelines.hires_sampler import SettingsEta

    params = HiresParams(**{**TINY, "sampler": "DPM++ 2M"}, hr_scale=1.5, hr_upscaler="Latent",
                         hr_second_pass_steps=2, hr_sampler="DDIM", hr_eta=0.25,
                         settings_eta=SettingsEta(ancestral=0.75, ddim=0.25))
    result = xyz_plot.run(HiresFix(sd1_pipe), params, xyz_plot.xyz_config(("Hires sampler", "DDIM, Euler a, Euler"),
                                                                         draw_legend=False))
    read = [parse_infotext(text, defaults=False) for text in result.samples.infotexts]
    assert [(r.get("Eta DDIM"), r.get("Eta")) for r in read] == [("0.25", None), (None, "0.75"), (None, None)]
    by_hand = HiresFix(sd1_pipe)(replace(params, hr_sampler="Euler a", hr_eta=0.75, settings_eta=None))
    assert result.samples.images[1].tobytes() == by_hand.images[0].tobytes()


def test_styles_axis_merges_each_value_and_checks_names():
    from mixkit.prompts.styles import PromptStyle, StyleLibrary

    styles = StyleLibrary(styles={"Photo": PromptStyle("Photo", "photo of {prompt}", "blurry"),
                                  "Warm": PromptStyle("Warm", "warm light")})
    context = PlotContext(styles=styles)
    config = xyz_plot.xyz_config(("Styles", '"Photo,Warm", Warm'), context={"styles": styles})
    cells = xyz_plot.check_plot(Txt2ImgParams(**TINY), config, context)
    assert [(c.params.prompt, c.params.negative_prompt) for c in cells] == [
        ("photo of a red cat, warm light", "blurry"), ("a red cat, warm light", "")]
    with pytest.raises(ValueError, match="Unknown style 'Cold' on the Styles axis. Valid styles: 'Photo', 'Warm'"):
        xyz_plot.check_plot(Txt2ImgParams(**TINY), xyz_plot.xyz_config(("Styles", "Cold")), context)


def test_prompt_order_reorders_the_words_in_place():
    config = xyz_plot.xyz_config(("Prompt order", "red, cat"))
    params = Txt2ImgParams(**{**TINY, "prompt": "a red fluffy cat, outside"})
    cells = xyz_plot.check_plot(params, config, PlotContext())
    assert [cell.params.prompt for cell in cells] == ["a red fluffy cat, outside", "a cat fluffy red, outside"]


def test_face_restore_values_as_a1111():
    from pipelines.scripts.xyz_axes import apply_face_restore

    params = Txt2ImgParams(**TINY)
    assert (apply_face_restore(params, "GFPGAN", [], None).restore_faces,
            apply_face_restore(params, "GFPGAN", [], None).face_restoration_model) == (True, "GFPGAN")
    assert apply_face_restore(params, "yes", [], None).restore_faces is True
    assert apply_face_restore(params, "off", [], None).restore_faces is False


def test_refiner_checkpoint_axis_sets_each_cells_refiner():
    names = {"checkpoint_names": ["models/a.safetensors [0123]", "b.ckpt"],
             "refiner_source": lambda name: f"/files/{name}"}
    context = PlotContext(**names)
    config = xyz_plot.xyz_config(("Refiner checkpoint", "None,a,B.ckpt"), context=names)
    params = Txt2ImgParams(**TINY, refiner="/files/call", refiner_switch_at=0.6)
    cells = xyz_plot.check_plot(params, config, context)
    assert [(cell.params.refiner, cell.params.refiner_switch_at) for cell in cells] == [
        (None, 0.6), ("/files/models/a.safetensors [0123]", 0.6), ("/files/b.ckpt", 0.6)]
    assert config.x.option.choices(context) == ["None", "b.ckpt", "models/a.safetensors [0123]"]
    with pytest.raises(ValueError, match="Unknown checkpoint 'c' on the Refiner checkpoint axis"):
        xyz_plot.check_plot(params, xyz_plot.xyz_config(("Refiner checkpoint", "a,c"), context=names),
                            context)
    with pytest.raises(ValueError, match="needs the caller's checkpoint list"):
        xyz_plot.check_plot(params, xyz_plot.xyz_config(("Refiner checkpoint", "None,a")), PlotContext())
    assert xyz_plot.check_plot(params, xyz_plot.xyz_config(("Refiner checkpoint", "None")), PlotContext())


def test_the_plots_images_save_with_their_before_copies(sd1_pipe, tmp_path):
    """A1111 saves the before-face-restoration / before-color-correction copy of every image a script makes."""
    result = xyz_plot.run(KeepsCopies(sd1_pipe), Txt2ImgParams(**TINY), xyz_plot.xyz_config(("Seed", "1,2")))
    assert sorted(result.samples.before_face_restoration) == sorted(result.samples.before_color_correction) == [0, 1]
    paths = result.save(tmp_path)
    assert len(paths) == 2
    for path in paths:
        assert path.with_name(f"{path.stem}-before-face-restoration.png").is_file()
        assert path.with_name(f"{path.stem}-before-color-correction.png").is_file()


def test_rng_source_cpu_and_gpu_are_the_same_noise_on_a_cpu_model(sd1_pipe):
    """A1111's GPU source draws with torch on the model's device: on a CPU that is its CPU source, mixkit's noise."""
    plain = sd1_pipe(Txt2ImgParams(**TINY))
    config = xyz_plot.xyz_config(("RNG source", "CPU, gpu"), include_lone_images=True)
    assert config.x.labels() == ["RNG source: CPU", "RNG source: gpu"]
    result = xyz_plot.run(sd1_pipe, Txt2ImgParams(**TINY), config)
    cpu, gpu = result.images[1:]
    assert cpu.tobytes() == gpu.tobytes() == plain.images[0].tobytes()
    assert [parse_infotext(text)["RNG"] for text in result.infotexts[1:]] == ["CPU", "CPU"]  # reproduces in A1111
    assert parse_infotext(result.infotexts[0])["X Type"] == "RNG source"


def test_rng_source_nv_cells_draw_philox_noise_and_record_it(sd1_pipe):
    """A1111's axis sets randn_source per cell: the NV cell is the image NV gives outside the plot."""
    config = xyz_plot.xyz_config(("RNG source", "CPU, nv"), include_lone_images=True)
    assert config.x.labels() == ["RNG source: CPU", "RNG source: nv"]
    result = xyz_plot.run(sd1_pipe, Txt2ImgParams(**TINY), config)
    cpu, nv = result.images[1:]
    assert nv.tobytes() == sd1_pipe(Txt2ImgParams(**TINY, rng_source="NV")).images[0].tobytes()
    assert cpu.tobytes() == sd1_pipe(Txt2ImgParams(**TINY)).images[0].tobytes() != nv.tobytes()
    assert [parse_infotext(text)["RNG"] for text in result.infotexts[1:]] == ["CPU", "NV"]


def test_rng_sources_that_are_none_of_a1111s_are_refused_while_validating():
    with pytest.raises(ValueError) as caught:
        xyz_plot.check_plot(Txt2ImgParams(**TINY), xyz_plot.xyz_config(("RNG source", "CPU, XPU")), PlotContext())
    assert str(caught.value) == "X axis: RNG source 'XPU' is not one of 'GPU', 'CPU', 'NV'."


def test_rng_source_gpu_on_a_model_off_the_cpu_is_refused_before_anything_runs(sd1_pipe):
    import torch

    class OnGpu:
        """The tiny pipeline, but its model says it runs on CUDA (where A1111's GPU noise is another noise)."""

        model = type("Model", (), {"device": torch.device("cuda", 0)})()

        def check_inputs(self, params):
            return sd1_pipe.check_inputs(params)

        def __call__(self, params, **hooks):
            raise AssertionError("no cell may run")

    with pytest.raises(ValueError) as caught:
        xyz_plot.run(OnGpu(), Txt2ImgParams(**TINY), xyz_plot.xyz_config(("Steps", "1"), ("RNG source", "CPU, GPU")))
    assert str(caught.value) == ("Y axis: RNG source GPU draws A1111's noise on the model's device (cuda:0), and mixkit "
                                 "draws all noise with CPU generators so that an image reproduces on any machine; "
                                 "choose CPU (A1111's CPU setting) or NV (NVIDIA's GPU noise, drawn on the CPU: what "
                                 "A1111 gives with GPU on an NVIDIA card, or with NV anywhere).")
    xyz_plot.check_plot(Txt2ImgParams(**TINY), xyz_plot.xyz_config(("RNG source", "CPU, NV")), PlotContext())
