"""``edgernn inspect``: the path each layer takes and why, without any board or conversion."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from edgernn.cli.main import cli

from edgernn.testing import zoo

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lstm_file(tmp_path_factory):
    model = zoo.lstm_pre_head()
    return model, zoo.save(model, tmp_path_factory.mktemp("inspect"))


def test_inspect_reports_path_reason_params_macs_and_states(lstm_file):
    model, path = lstm_file
    result = CliRunner().invoke(cli, ["inspect", path, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    rows = {r["name"]: r for r in report["layers"]}
    lstm = next(l for l in model.layers if type(l).__name__ == "LSTM")
    row = rows[lstm.name]
    assert row["path"] == "fused"  # dropout and recurrent_dropout never block fusion
    assert report["rnn_paths"] == [f"{lstm.name} (LSTM): fused"]
    assert "dropout ignored at inference" in row["why"] and "recurrent_dropout ignored at inference" in row["why"]
    assert row["states"] == [{"name": f"{lstm.name}.h", "size": 16}, {"name": f"{lstm.name}.c", "size": 16}]
    assert row["params"] == lstm.count_params()
    assert row["macs_per_step"] == 4 * 16 * (8 + 16)
    dropout = next(l for l in model.layers if type(l).__name__ == "Dropout")
    assert rows[dropout.name]["path"] == "dropped"
    assert report["params"] == model.count_params()
    assert report["sequence_output"] == "every step"
    # the board fit: the totals as before, and placement's verdict (a small model streams nothing)
    boards = {b["board"]: b for b in report["boards"]}
    deck = boards["ai_deck"]
    assert deck["int8"] > 0 and deck["memory_bytes"] == 327680 and deck["stream_memory"] == "l3"
    assert deck["fit"]["int8"]["fits"] and deck["fit"]["int8"]["streamed_bytes"] == 0
    assert deck["fit"]["int8"]["verdict"].startswith("fits (")


def test_inspect_table_runs_without_a_board(lstm_file):
    _, path = lstm_file
    result = CliRunner().invoke(cli, ["inspect", path])
    assert result.exit_code == 0, result.output
    assert "step" in result.output and "MACs" in result.output


def test_help_does_not_import_tensorflow():
    code = "import sys; from edgernn.cli.main import main; sys.argv=['edgernn','--help'];\n" \
           "try:\n    main()\nexcept SystemExit:\n    pass\nassert 'tensorflow' not in sys.modules, 'tensorflow imported'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
