"""The link under injected faults: each run either gives exactly the right answer, with every step
run once, or fails with a clear LinkError. It never passes with a wrong answer."""

from __future__ import annotations

import numpy as np
import pytest

from edgernn.errors import LinkError
from edgernn.link import LinkClient, open_port
from faults import FaultPlan, FaultyPort
from toy import STATE_BYTES, run_toy

pytestmark = pytest.mark.toolchain

STEPS = 1200


def toy_inputs(steps: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-127, 128, (steps, 3)).astype(np.int8)


def run_with_faults(device, plan: FaultPlan, steps: int = STEPS, timeout: float = 0.3, retries: int = 8,
                    steps_per_frame: int = 40):
    port = FaultyPort(open_port(device.url), plan, reset_device=device.restart)
    link = LinkClient(port, url=device.url, timeout=timeout, retries=retries)
    xs = toy_inputs(steps, plan.seed)
    try:
        link.hello()
        result = link.run(xs, states="every", steps_per_frame=steps_per_frame)
    finally:
        link.close()
    return xs, result, port.injected


def assert_exactly_once(xs, result):
    ys, states = run_toy(xs)
    assert np.array_equal(result.outputs, ys)
    device_states = result.states
    # The toy's state opens with a count of the steps it ran: one per input, none twice.
    counts = device_states[:, :4].copy().view("<u4").ravel()
    assert np.array_equal(counts, np.arange(1, len(xs) + 1))
    assert np.array_equal(device_states, np.frombuffer(b"".join(states), np.uint8).reshape(-1, STATE_BYTES))


FAULTS = {
    "flip": FaultPlan(flip=2e-4, seed=1),
    "drop": FaultPlan(drop=2e-4, seed=2),
    "duplicate": FaultPlan(duplicate=2e-4, seed=3),
    "truncate": FaultPlan(truncate=0.05, seed=4),
    "repeat": FaultPlan(repeat=0.2, seed=5),
    "stall": FaultPlan(stall=0.1, seed=6),
    "answers only": FaultPlan(flip=5e-4, drop=2e-4, to_device=False, seed=7),
    "requests only": FaultPlan(flip=5e-4, drop=2e-4, from_device=False, seed=8),
    "everything": FaultPlan(flip=1e-4, drop=1e-4, duplicate=1e-4, truncate=0.02, repeat=0.05,
                            stall=0.03, seed=9),
}


@pytest.mark.parametrize("name", list(FAULTS))
def test_recoverable_faults_give_the_exact_answer(host_device, name):
    xs, result, injected = run_with_faults(host_device, FAULTS[name])
    assert sum(injected.values()) > 0, "the plan injected nothing"
    assert_exactly_once(xs, result)
    if name != "repeat":  # a repeated request is answered twice, and that needs no retry
        assert result.retries > 0


@pytest.mark.parametrize("write", [3, 10, 25])
def test_a_device_reset_mid_sequence_is_a_clear_failure(host_device, write):
    # Writes: 1 HELLO, 2 RESET, then one STEP frame each.
    with pytest.raises(LinkError, match="restarted during the sequence .* its state is lost"):
        run_with_faults(host_device, FaultPlan(reset_at_write=write))


def test_a_link_too_broken_to_recover_is_a_clear_failure(host_device):
    with pytest.raises(LinkError, match=r"gave no valid answer to (HELLO|RESET|STEP).* after 3 attempts"):
        run_with_faults(host_device, FaultPlan(flip=0.05, seed=11), retries=2, timeout=0.1)


@pytest.mark.parametrize("seed", range(12))
def test_random_fault_mixes_never_pass_wrongly(host_device, seed):
    rng = np.random.default_rng(seed)
    plan = FaultPlan(flip=float(rng.choice([0, 3e-4, 1e-3])), drop=float(rng.choice([0, 3e-4])),
                     duplicate=float(rng.choice([0, 3e-4])), truncate=float(rng.choice([0, 0.05])),
                     repeat=float(rng.choice([0, 0.2])), stall=float(rng.choice([0, 0.05])),
                     reset_at_write=int(rng.integers(3, 40)) if rng.random() < 0.3 else None, seed=seed)
    try:
        xs, result, _ = run_with_faults(host_device, plan, steps=400, timeout=0.15, retries=6,
                                        steps_per_frame=10)
    except LinkError as exc:
        message = str(exc)
        assert "\n" not in message and len(message) < 300
        return
    assert_exactly_once(xs, result)
