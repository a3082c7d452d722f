import json

from webui.cli import main


def test_samplers_lists_every_registered_sampler(capsys):
    from pipelines.samplers import SAMPLERS

    assert main(["samplers"]) == 0
    out = capsys.readouterr().out
    for name in SAMPLERS.names():
        assert name in out


def test_samplers_json_has_the_a1111_shape(capsys):
    assert main(["samplers", "--json"]) == 0
    items = json.loads(capsys.readouterr().out)
    assert {"name", "aliases", "options"} <= set(items[0])
    assert "DPM++ 2M" in [item["name"] for item in items]
