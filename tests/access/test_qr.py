"""The share link's QR code: the SVG the hub draws is the link's URL, module for module, and
holds nothing a browser could run."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import segno

from hub.access.qr import ERROR_LEVEL, qr_svg

SVG = "{http://www.w3.org/2000/svg}"


def modules(svg: str) -> list[list[bool]]:
    """Read the dark modules back from the SVG's path (``M x y``, ``m dx dy``, ``h n``), one
    row per line, quiet zone included, as the QR matrix a reader would sample."""
    root = ET.fromstring(svg)
    _, _, width, height = (int(v) for v in root.attrib["viewBox"].split())
    grid = [[False] * width for _ in range(height)]
    dark = [p for p in root.iter(f"{SVG}path") if p.attrib.get("stroke") == "#000"]
    assert len(dark) == 1
    x = y = 0.0
    for op, a, b in re.findall(r"([Mmh])(-?[\d.]+)(?: (-?[\d.]+))?", dark[0].attrib["d"]):
        if op == "M":
            x, y = float(a), float(b)
        elif op == "m":
            x, y = x + float(a), y + float(b)
        else:
            row = int(y)  # a line one unit wide, drawn through the row's middle
            for col in range(int(x), int(x + float(a))):
                grid[row][col] = True
            x += float(a)
    return grid


def encodes(svg: str, url: str) -> bool:
    """Whether ``svg`` draws exactly the QR code of ``url``."""
    expected = segno.make(url, error=ERROR_LEVEL, micro=False)
    return modules(svg) == [[bool(v) for v in row] for row in expected.matrix_iter(border=4)]


def test_the_svg_encodes_the_url_and_nothing_else() -> None:
    url = "https://hub.example/s/s-0123456789abcdef#token=eyJhbGciOiJIUzI1NiJ9.e30.c2ln"
    svg = qr_svg(url)
    expected = segno.make(url, error=ERROR_LEVEL, micro=False)
    assert expected.mode == "byte"  # the whole URL, as bytes
    assert encodes(svg, url)
    # Only the two paths: no text, no links, no script, no foreign elements or attributes.
    root = ET.fromstring(svg)
    assert {el.tag for el in root.iter()} == {f"{SVG}svg", f"{SVG}path"}
    assert url not in svg
    assert "script" not in svg.lower()
    assert "href" not in svg.lower()


def test_a_different_url_draws_a_different_code() -> None:
    a, b = qr_svg("https://hub.example/s/s-1#token=a"), qr_svg("https://hub.example/s/s-1#token=b")
    assert modules(a) != modules(b)
