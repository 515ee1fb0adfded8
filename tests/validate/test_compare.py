"""The running statistics of edgernn validate (edgernn/validate/compare.py), against values worked out
by hand or computed whole with numpy: streaming them chunk by chunk must give what one pass gives."""

import math

import numpy as np
import pytest

from edgernn.validate import compare

INT8_Y = {"dtype": "int8", "scale": 0.5, "zero_point": 0, "shape": [1, 2]}
FLOAT_Y = {"dtype": "float32", "scale": 0.0, "zero_point": 0, "shape": [1, 2]}


@pytest.mark.parametrize("steps, windows", [
    (1, [(0, 1)]),
    (200, [(0, 200)]),
    (500, [(0, 200), (200, 500)]),
    (2000, [(0, 200), (200, 1000), (1000, 2000)]),
    (5000, [(0, 200), (200, 1000), (1000, 2000), (2000, 5000), (4000, 5000)]),
    (10_000, [(0, 200), (200, 1000), (1000, 2000), (2000, 10_000), (9000, 10_000)]),
    (25_000, [(0, 200), (200, 1000), (1000, 2000), (2000, 10_000), (10_000, 25_000), (24_000, 25_000)]),
])
def test_drift_windows_cover_the_run_and_add_the_last_thousand(steps, windows):
    assert compare.drift_windows(steps) == windows


def test_reference_stats_count_int_mismatches_in_lsb_and_find_the_first():
    stats = compare.ReferenceStats(INT8_Y, compare.drift_windows(6))
    ref = np.array([[1, 2], [3, 4], [5, 6]], np.int8)
    stats.update(0, 0, ref.copy(), ref, None, None)
    device = np.array([[5, 6], [7, 9], [9, 7]], np.int8)     # one off by 3 LSB, one by 1 LSB
    stats.update(0, 3, device, np.array([[5, 6], [7, 6], [9, 6]], np.int8), None, None)
    got = stats.result()
    assert got["mismatches"] == 2 and got["compared_values"] == 12
    assert got["max_abs_lsb"] == 3 and got["max_abs"] == pytest.approx(1.5)   # 3 LSB at scale 0.5
    assert got["first_mismatch"] == {"sequence": 0, "step": 4, "output": 1, "device": 9.0, "reference": 6.0}
    assert "state_mismatches" not in got          # no states were compared


def test_reference_stats_split_mismatches_by_window():
    windows = [(0, 200), (200, 500)]
    stats = compare.ReferenceStats(INT8_Y, windows)
    ref = np.zeros((500, 2), np.int8)
    device = ref.copy()
    device[[10, 199, 200, 499], 0] = 1
    # two chunks whose boundary does not fall on a window's edge
    stats.update(0, 0, device[:150], ref[:150], None, None)
    stats.update(0, 150, device[150:], ref[150:], None, None)
    assert stats.window_mismatches == [2, 2] and stats.result()["mismatches"] == 4


def test_reference_stats_float_tolerance_is_relative_with_a_floor_of_one():
    stats = compare.ReferenceStats(FLOAT_Y, [(0, 2)])
    ref = np.array([[1000.0, 0.0], [0.5, -2.0]], np.float32)
    inside = ref + np.array([[0.009, 9e-6], [9e-6, 1.9e-5]], np.float32)   # within 1e-5 * max(|r|, 1)
    stats.update(0, 0, inside, ref, None, None)
    assert stats.result()["mismatches"] == 0
    outside = ref + np.array([[0.02, 0.0], [2e-5, 0.0]], np.float32)
    stats.update(1, 0, outside, ref, None, None)
    got = stats.result()
    assert got["mismatches"] == 2 and got["first_mismatch"]["sequence"] == 1
    assert got["max_abs_lsb"] == 0                 # no LSB for float outputs


def test_reference_stats_compare_state_bytes_and_name_the_first_step():
    stats = compare.ReferenceStats(INT8_Y, [(0, 4)])
    y = np.zeros((4, 2), np.int8)
    ref_states = np.zeros((4, 3), np.uint8)
    device_states = ref_states.copy()
    device_states[2, 1] = device_states[3, 0] = 7
    stats.update(0, 10, y, y, device_states, ref_states)
    got = stats.result()
    assert got["mismatches"] == 0 and got["state_mismatches"] == 2
    assert got["first_state_mismatch_step"] == 12


def test_error_sums_streamed_equal_the_whole_computation():
    rng = np.random.default_rng(3)
    want = rng.normal(size=(50, 3))
    device = want + rng.normal(scale=0.1, size=want.shape)
    sums = compare.ErrorSums()
    for lo in range(0, 50, 7):
        sums.update(device[lo:lo + 7], want[lo:lo + 7])
    got = sums.result()
    err = (device - want).ravel()
    assert got["rmse"] == pytest.approx(math.sqrt(np.mean(err ** 2)))
    assert got["mae"] == pytest.approx(np.mean(np.abs(err)))
    assert got["max_abs"] == pytest.approx(np.max(np.abs(err)))
    assert got["l2r"] == pytest.approx(np.linalg.norm(err) / np.linalg.norm(want))
    assert got["cos"] == pytest.approx(np.dot(device.ravel(), want.ravel())
                                       / (np.linalg.norm(device) * np.linalg.norm(want)))


def test_error_sums_edge_cases():
    assert compare.ErrorSums().result() == {"rmse": None, "mae": None, "max_abs": None, "l2r": None, "cos": None}
    zero_want = compare.ErrorSums()
    zero_want.update(np.array([1.0, -1.0]), np.zeros(2))
    got = zero_want.result()
    assert got["l2r"] == math.inf and got["cos"] == 0.0 and got["rmse"] == pytest.approx(1.0)
    exact = compare.ErrorSums()
    exact.update(np.array([2.0, 3.0]), np.array([2.0, 3.0]))
    assert exact.result()["rmse"] == 0.0 and exact.result()["cos"] == pytest.approx(1.0)


def test_drift_table_puts_each_step_in_its_windows():
    windows = [(0, 2), (2, 5), (3, 5)]
    table = compare.DriftTable(windows)
    want = np.zeros((5, 1))
    device = np.array([[1.0], [1.0], [2.0], [2.0], [4.0]])
    table.update(0, device[:3], want[:3])
    table.update(3, device[3:], want[3:])
    rows = table.rows([0, 1, 1])
    assert [r["steps"] for r in rows] == [[0, 2], [2, 5], [3, 5]]
    assert rows[0]["rmse"] == pytest.approx(1.0) and rows[0]["max_abs"] == 1.0
    assert rows[1]["mae"] == pytest.approx(8 / 3) and rows[1]["max_abs"] == 4.0
    assert rows[2]["rmse"] == pytest.approx(math.sqrt((4 + 16) / 2))
    assert [r["reference_mismatches"] for r in rows] == [0, 1, 1]


def test_drift_table_labels_the_last_thousand():
    windows = compare.drift_windows(5000)
    rows = compare.DriftTable(windows).rows()
    assert rows[-1]["label"] == "4,000–5,000 (last 1,000)" and rows[0]["label"] == "0–200"
    assert rows[0]["rmse"] is None                 # no float values yet


def test_cycle_stats_exact_mean_and_max_and_median_of_all_when_small():
    stats = compare.CycleStats()
    stats.update(np.array([10, 30, 20], np.uint32))
    stats.update(np.array([40], np.uint32))
    got = stats.result()
    assert got == {"cycles_per_step": 25.0, "cycles_per_step_median": 25.0, "cycles_per_step_max": 40.0}
    assert compare.CycleStats().result()["cycles_per_step"] == 0.0


def test_cycle_stats_sample_past_the_limit(monkeypatch):
    monkeypatch.setattr(compare, "CYCLE_SAMPLE", 100)
    stats = compare.CycleStats(seed=1)
    values = np.arange(1000, dtype=np.uint32)
    for lo in range(0, 1000, 64):
        stats.update(values[lo:lo + 64])
    got = stats.result()
    assert got["cycles_per_step"] == pytest.approx(499.5) and got["cycles_per_step_max"] == 999.0
    assert got["cycles_median_from_sample"] == 100
    assert len(set(stats.sample.tolist())) == 100          # a sample of distinct steps
    assert 250 < got["cycles_per_step_median"] < 750       # a uniform sample's median lies near the middle


def test_plot_bins_keep_the_first_value_of_each_bin_of_sequence_zero():
    bins = compare.PlotBins(steps=10, channels=1)
    assert bins.bin == 1
    device = np.arange(10, dtype=np.float32)[:, None]
    reference = device.copy()
    reference[4] += 3
    bins.update(0, 0, device, reference, device + 1)
    bins.update(1, 0, device + 100, reference + 100, None)    # later sequences add errors, not points
    assert bins.device[:, 0].tolist() == device[:, 0].tolist()
    assert bins.ref_err[4] == 3 and bins.ref_err[3] == 0
    assert bins.float_n.tolist() == [1] * 10 and bins.float_sq.tolist() == [1.0] * 10


def test_plot_bins_group_long_runs():
    bins = compare.PlotBins(steps=compare.PLOT_POINTS * 3, channels=2)
    assert bins.bin == 3 and len(bins.x) == compare.PLOT_POINTS and bins.x[1] == 3


def test_device_save_writes_an_npz_that_reads_back(tmp_path):
    target = tmp_path / "run.npz"
    save = compare.DeviceSave(target, sequences=2, steps=3, outputs=2, y_dtype=np.int8)
    y = np.arange(12, dtype=np.int8).reshape(6, 2)
    save.append(y[:3], y[:3].astype(np.float32) / 2, np.array([1, 2, 3]))
    save.append(y[3:], y[3:].astype(np.float32) / 2, np.array([4, 5, 6]))
    assert save.finish() == target
    data = np.load(target)
    assert data["y"].shape == (2, 3, 2) and data["y"].reshape(6, 2).tolist() == y.tolist()
    assert data["cycles"].tolist() == [[1, 2, 3], [4, 5, 6]]
    assert compare.is_edgernn_save(target)
    assert [p.name for p in tmp_path.iterdir()] == ["run.npz"]      # its temporary folder is gone


def test_device_save_discard_leaves_nothing(tmp_path):
    save = compare.DeviceSave(tmp_path / "run.npz", 1, 1, 1, np.int8)
    save.discard()
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "other.npz").write_bytes(b"not a zip")
    assert not compare.is_edgernn_save(tmp_path / "other.npz")


@pytest.mark.parametrize("precision, expected", [
    (None, None),
    ({"plan": "int8", "note": "fused mode: auto is int8"}, None),
    ({"max_error": 0.02, "error": 0.019, "int8_error": 0.07, "int16_error": 0.009, "met": True, "int16_ops": 3,
      "int8_ops": 2, "quantize_ops": 2, "x": "int8", "y": "int16", "states": {"cell.h": "int16"},
      "plan": [{"name": "FULLY_CONNECTED", "layer": "cell/fc", "dtype": "int16"},
               {"name": "TANH", "layer": "cell/tanh", "dtype": "int16"},
               {"name": "ADD", "layer": None, "dtype": "int16"},
               {"name": "MUL", "layer": "head", "dtype": "int8"},
               {"name": "QUANTIZE", "layer": "cell", "dtype": "int8"}]},
     {"max_error": 0.02, "calibration_l2r": 0.019, "int8_l2r": 0.07, "int16_l2r": 0.009, "met": True,
      "int16_ops": 3, "int8_ops": 2, "quantize_ops": 2, "x": "int8", "y": "int16", "states": {"cell.h": "int16"},
      "int16_ops_by_layer": {"cell": 2, "(graph)": 1}, "weights": "TF's rounding"}),
])
def test_the_precision_plan_in_brief(precision, expected):
    from edgernn.validate.run import precision_summary

    assert precision_summary(precision) == expected


@pytest.mark.parametrize("precision, words", [
    ({}, "TF's rounding"),
    ({"weight_rounding": {"rounding": "nearest", "ops": []}, "two_part_weights": []}, "TF's rounding"),
    ({"weight_rounding": {"rounding": "compensated", "ops": ["a", "b", "c"]}, "two_part_weights": []},
     "3 FULLY_CONNECTED in error-compensated rounding"),
    ({"weight_rounding": {"rounding": "nearest", "ops": []}, "two_part_weights": ["a", "b"]},
     "2 FULLY_CONNECTED in two int8 parts"),
])
def test_how_the_plan_holds_its_weights(precision, words):
    from edgernn.validate.run import weights_summary

    assert weights_summary(precision) == words
