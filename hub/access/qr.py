"""A share link as a QR code a phone can scan: an SVG the hub draws from the link's URL.

The picture is made here, on the server, by ``segno`` (a pure-Python QR encoder that follows
ISO/IEC 18004), so the page loads no third-party script. The SVG holds nothing but a ``path``
of black modules on a white square, computed from the URL alone: no text, no links, no script.
The page still shows it only as an ``<img>`` with a ``data:`` URL, where a browser runs no
script whatever the SVG holds.

Medium error correction (``M``, 15 % of the code may be lost) suits a screen read by a phone
camera; the four-module quiet zone is the one the standard asks for.
"""

from __future__ import annotations

import io

import segno

ERROR_LEVEL = "m"
QUIET_ZONE = 4


def qr_svg(url: str) -> str:
    """The SVG document (UTF-8 text, no XML declaration) of ``url`` as a QR code, one unit
    per module and a ``viewBox`` so that it scales to any size."""
    code = segno.make(url, error=ERROR_LEVEL, micro=False)
    out = io.BytesIO()
    code.save(
        out,
        kind="svg",
        xmldecl=False,
        svgns=True,
        svgclass=None,
        lineclass=None,
        omitsize=True,
        scale=1,
        border=QUIET_ZONE,
        dark="#000",
        light="#fff",
    )
    return out.getvalue().decode("utf-8")
