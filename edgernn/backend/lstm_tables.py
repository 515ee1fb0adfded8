"""The two lookup tables of templates/kernels/edgernn_lstm.c, computed by running the kernel's own
16-bit fixed-point arithmetic (written here in Python as it is in the C): ``fx_exp_quarter_table`` and
``fx_newton_high``. tests/backend/test_lstm_tables.py holds the C file's tables to ``render()``; after
a change of that arithmetic, ``python -m edgernn.backend.lstm_tables`` prints the tables to paste.
"""

from __future__ import annotations

FX_EXP_MINUS_ONE_EIGHTH = 28918
FX_ONE_THIRD = 10923
FX_48_OVER_17 = 23130
FX_NEG_32_OVER_17 = -15420
EXP_ENTRIES = 2048              # fx_exp_quarter(-4 * m), m = 1..2048
HALF_DENOMINATORS = 1 << 14     # hd in [2^14, 2^15)


def fx_mul(a: int, b: int) -> int:
    return (a * b + (1 << 14)) >> 15


def fx_exp_quarter(a: int) -> int:
    x = a + (1 << 12)
    x2 = fx_mul(x, x)
    x3 = fx_mul(x2, x)
    x4_over_4 = (fx_mul(x2, x2) + 2) >> 2
    poly = (fx_mul(x4_over_4 + x3, FX_ONE_THIRD) + x2 + 1) >> 1
    return FX_EXP_MINUS_ONE_EIGHTH + fx_mul(FX_EXP_MINUS_ONE_EIGHTH, x + poly)


def fx_newton_steps(hd: int) -> int:
    x = FX_48_OVER_17 + fx_mul(hd, FX_NEG_32_OVER_17)
    for _ in range(3):
        x += 4 * fx_mul(x, (1 << 13) - fx_mul(hd, x))
    return x


def exp_table() -> list[int]:
    return [fx_exp_quarter(-4 * m) for m in range(1, EXP_ENTRIES + 1)]


def newton_high() -> list[int]:
    """One bit per half denominator, 8 to a byte: 1 when the Newton result is the higher of its two
    candidates (edgernn_lstm.c's fx_newton_half_reciprocal)."""
    bits = []
    for hd in range(HALF_DENOMINATORS, 2 * HALF_DENOMINATORS):
        x0 = FX_48_OVER_17 + fx_mul(hd, FX_NEG_32_OVER_17)
        low = (1 << 28) // hd - 2
        candidate = low + ((x0 - low) & 3)
        result = fx_newton_steps(hd)
        if result not in (candidate, candidate + 4):
            raise ValueError(f"half denominator {hd}: {result} is neither candidate {candidate} nor +4")
        bits.append(int(result == candidate + 4))
    return [sum(bits[8 * j + b] << b for b in range(8)) for j in range(len(bits) // 8)]


def _rows(items: list[str], per_row: int) -> str:
    rows = [", ".join(items[i:i + per_row]) for i in range(0, len(items), per_row)]
    return ",\n".join("    " + r for r in rows)


def render() -> dict[str, str]:
    """The initializer lines of each table, as edgernn_lstm.c holds them."""
    e = exp_table()
    pairs = [f"FX_PAIR({e[i]}, {e[i + 1]})" for i in range(0, len(e), 2)]
    return {
        "fx_exp_quarter_table": _rows(pairs, 4) + ",",
        "fx_newton_high": _rows([f"0x{b:02x}" for b in newton_high()], 16),
    }


if __name__ == "__main__":
    for name, text in render().items():
        print(f"/* {name} */\n{text}\n")
