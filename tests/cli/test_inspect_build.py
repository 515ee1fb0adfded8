"""`edgernn inspect OUT/`: a build folder's precision plan, in the terminal and in --json."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from edgernn.cli.main import cli
from edgernn.testing import zoo

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def auto_folder(tmp_path_factory):
    from edgernn.pipeline.convert import convert

    folder = tmp_path_factory.mktemp("auto") / "out"
    model = zoo.simplernn_relu()
    convert(model, folder, quant="auto", calib=zoo.trajectories(8, 100, 3, 0), mode="step", max_error=0.01)
    return folder


def test_inspect_of_a_build_folder_gives_its_precision_plan(auto_folder):
    manifest = json.loads((auto_folder / "manifest.json").read_text())
    p = manifest["precision"]
    result = CliRunner().invoke(cli, ["inspect", str(auto_folder), "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert found["quant"] == "auto" and found["precision"]["error"] == p["error"]
    assert found["precision"]["int16_ops"] == p["int16_ops"] == sum(r["int16"] for r in found["precision"]["layers"])
    assert [r["dtype"] for r in found["precision"]["plan"]] == [r["dtype"] for r in p["plan"]]
    text = CliRunner().invoke(cli, ["inspect", str(auto_folder)])
    assert text.exit_code == 0, text.output
    assert "precision plan: error" in text.output and f"{p['error']:.4f}" in text.output
    assert "int16" in text.output and "precision by layer" in text.output


def test_inspect_of_a_uniform_build_says_so(tmp_path):
    from edgernn.pipeline.convert import convert

    folder = tmp_path / "out"
    convert(zoo.simplernn_relu(), folder, quant="int8", calib=zoo.trajectories(4, 50, 3, 0), mode="step")
    found = json.loads(CliRunner().invoke(cli, ["inspect", str(folder), "--json"]).output)
    assert found["quant"] == "int8" and found["precision"] is None
    text = CliRunner().invoke(cli, ["inspect", str(folder)]).output
    assert "every op int8" in text


def test_inspect_of_a_folder_whose_manifest_is_not_json_is_one_line(tmp_path):
    (tmp_path / "manifest.json").write_text("{nope")
    result = CliRunner().invoke(cli, ["inspect", str(tmp_path)])
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1 and "not valid JSON" in result.output
