"""Screenshots of validate's report.html in headless Chromium (Debian's `chromium`), for docs/report.md.

    python scripts/report_screenshots.py PASS.html FAIL.html [--out docs]

writes report_pass.png (the top of a PASS: what ran, the summary, exactness), report_pass_details.png (its
sections "Where the cycles go" and "Where the bytes live") and report_fail.png (the top of a FAIL). The
browser is the tests' (edgernn/testing/browser.py): a new empty profile, no network, ended with its helpers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from edgernn.testing.browser import Chromium

ROOT = Path(__file__).resolve().parents[1]

WIDTH = 1100


def shoot(browser: Chromium, page: Path, out: Path, first: str | None = None, last: str | None = None,
          height: int = 940) -> None:
    """The page from its top (``height`` CSS pixels), or from section ``first`` to the end of ``last``."""
    browser.open(page)
    if first is None:
        browser.screenshot(out, WIDTH, height)
    else:
        where = "document.getElementById('{}').getBoundingClientRect().{} + window.scrollY"
        top = browser.evaluate(where.format(first, "top")) - 8
        browser.screenshot(out, WIDTH, browser.evaluate(where.format(last, "bottom")) + 8 - top, top)
    print(f"{out} ({out.stat().st_size:,} bytes)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("passed", type=Path, help="report.html of a PASS (with --profile, for the cycles)")
    parser.add_argument("failed", type=Path, help="report.html of a FAIL")
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    args = parser.parse_args()
    with Chromium(width=WIDTH) as browser:
        shoot(browser, args.passed, args.out / "report_pass.png")
        shoot(browser, args.passed, args.out / "report_pass_details.png", "profile", "memory")
        shoot(browser, args.failed, args.out / "report_fail.png", height=760)


if __name__ == "__main__":
    main()
