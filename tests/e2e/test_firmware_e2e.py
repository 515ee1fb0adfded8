"""End to end: a Keras model converted to an int8 step model (and an LSTM to TFLite's fused
UNIDIRECTIONAL_SEQUENCE_LSTM), firmware generated, built for the host and qemu_riscv32 boards, and
validated over the link: the device must match the interpreter exactly over at least 1,000 steps."""

from __future__ import annotations

import pytest

from edgernn.targets.board import load_board

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

KINDS = ["lstm64", "lstm64_fused", "gru", "cfc"]
STEPS = 1000


def build_model(kind: str):
    import keras

    keras.utils.set_random_seed(0)
    if kind.startswith("lstm64"):
        rnn = keras.layers.LSTM(64, return_sequences=True)
    elif kind == "gru":
        rnn = keras.layers.GRU(16, return_sequences=True)
    else:
        import ncps.keras

        rnn = ncps.keras.CfC(16, return_sequences=True)
    return keras.Sequential([keras.Input((None, 2)), rnn, keras.layers.Dense(1)], name=kind.split("_")[0])


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    from zoo import trajectories

    from edgernn.pipeline.convert import convert_model

    made = {}

    def get(kind: str, board: str):
        if (kind, board) not in made:
            folder = tmp_path_factory.mktemp(f"{kind}_{board}")
            model = build_model(kind)
            path = folder / f"{kind}.keras"
            model.save(path)
            out = folder / "out"
            mode = "fused" if kind.endswith("_fused") else "step"
            manifest = convert_model(str(path), out, quant="int8", calib=trajectories(8, 80, 2, 1),
                                     board=board, mode=mode)
            assert manifest["mode"] == mode
            if mode == "fused":
                assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in manifest["ops"] and "WHILE" not in manifest["ops"]
            from edgernn.backend import generate_firmware

            generate_firmware(out, load_board(board))
            made[(kind, board)] = out
        return made[(kind, board)]

    return get


def check_parity(out):
    from zoo import trajectories

    from edgernn.validate.run import validate

    report = validate(out, data=trajectories(1, STEPS, 2, 5))
    ref = report["reference"]
    assert report["steps"] >= STEPS
    assert ref["mismatches"] == 0 and ref["state_mismatches"] == 0, (
        f"{ref['mismatches']} output and {ref['state_mismatches']} state mismatches, "
        f"max {ref['max_abs_lsb']} LSB, first at {ref['first_mismatch']}")
    assert report["pass"]
    assert report["float"]["rmse"] is not None and report["float"]["cos"] > 0.9
    return report


def test_the_device_says_what_ran_the_step(converted):
    report = check_parity(converted("gru", "host"))
    assert (report["device"]["workers"], report["device"]["simd_dot"], report["device"]["offloaded"]) == (1, False, False)
    assert report["device"]["macs_per_cycle"] == pytest.approx(
        report["device"]["macs_per_step"] / report["device"]["cycles_per_step"])


@pytest.mark.parametrize("kind", KINDS)
def test_int8_model_on_the_host_board(converted, kind):
    check_parity(converted(kind, "host"))


@pytest.mark.qemu
@pytest.mark.parametrize("kind", KINDS)
def test_int8_model_on_qemu_riscv32(converted, kind):
    report = check_parity(converted(kind, "qemu_riscv32"))
    assert report["device"]["cycles_per_step_max"] - report["device"]["cycles_per_step"] < \
        0.01 * report["device"]["cycles_per_step"]


@pytest.mark.qemu
@pytest.mark.parametrize("optimize", ["-O2", "-Os"])
def test_generated_firmware_builds_warning_free_for_rv32imc(converted, optimize, tmp_path):
    from edgernn.targets import device as devices

    out = converted("lstm64", "qemu_riscv32")
    result = devices.build_elf(out / "firmware", "qemu_riscv32", tmp_path, optimize=optimize)
    assert "-Werror" in result.command and optimize in result.command
    assert result.code_bytes and result.data_bytes
