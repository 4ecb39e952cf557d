"""Layout checks of the browser tests, measured in the page: an element is in the viewport and
not covered, text does not overflow its box, no word breaks across lines, nothing scrolls
sideways."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PHONE = {"width": 375, "height": 812}
DESKTOP = {"width": 1280, "height": 800}
VIEWPORTS = {"phone": PHONE, "desktop": DESKTOP}

TEXT_BOXES = "button, .state-badge, .conn, .identity, label, .tally"
"""What must show its text whole: buttons, status pills, labels."""

_PROBLEMS = (Path(__file__).parent / "js" / "layout_problems.js").read_text()

_PLACE = """(node) => {
  const r = node.getBoundingClientRect();
  const x = Math.min(Math.max(r.left + r.width / 2, 0), innerWidth - 1);
  const y = Math.min(Math.max(r.top + r.height / 2, 0), innerHeight - 1);
  const hit = document.elementFromPoint(x, y);
  return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, width: r.width,
          height: r.height, viewWidth: innerWidth, viewHeight: innerHeight,
          covered: !(hit && (hit === node || node.contains(hit)))};
}"""


def layout_problems(page: Any, selector: str = TEXT_BOXES) -> list[str]:
    """Sideways scrolling, and the visible elements matching ``selector`` whose text overflows
    their box or has a word broken across two lines."""
    return list(page.evaluate(_PROBLEMS, selector))


def place(locator: Any) -> dict[str, Any]:
    """Where ``locator``'s element is: its box, the viewport's size, and whether another element
    covers its centre."""
    return dict(locator.evaluate(_PLACE))


def fully_visible(locator: Any) -> bool:
    """Whether ``locator``'s element is inside the viewport, whole, and not covered."""
    box = place(locator)
    return bool(
        box["width"] > 0
        and box["top"] >= 0
        and box["left"] >= 0
        and box["bottom"] <= box["viewHeight"] + 0.5
        and box["right"] <= box["viewWidth"] + 0.5
        and not box["covered"]
    )
