"""PNG export beside the SVG export, in a real Chromium: the file is a valid PNG (every chunk's CRC checked, the
image data inflated to exactly the size its header declares), twice the SVG export's size, and it shows the
graph (the node fills of the stylesheet, not a blank canvas)."""

from __future__ import annotations

import base64
import struct
import xml.etree.ElementTree as ET
import zlib

from .conftest import post_events
from .graphs import known_graph
from .test_viewer import N_NODES, open_known

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# frontend/style.css: .vnode.kind-param rect.body { fill: #dbeafe }, .vnode.kind-output rect.body { fill: #ffedd5 }
PARAM_FILL = (0xDB, 0xEA, 0xFE)
OUTPUT_FILL = (0xFF, 0xED, 0xD5)


def read_png(data: bytes) -> tuple[int, int, int, int, bytes]:
    """(width, height, bit depth, colour type, inflated image data) of a PNG; raises on any defect."""
    assert data[:8] == PNG_SIGNATURE, data[:8]
    pos, chunks = 8, []
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        assert zlib.crc32(kind + body) == crc, f"bad CRC in chunk {kind!r}"
        chunks.append((kind, body))
        pos += 12 + n
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND"
    w, h, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert interlace == 0
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    channels = {2: 3, 6: 4, 0: 1, 4: 2}[colour]
    assert len(raw) == h * (1 + w * channels * depth // 8)  # one filter byte per row, then the row's pixels
    return w, h, depth, colour, raw


def test_export_png_button_downloads_the_graph_at_twice_the_svg_size(page, server):
    open_known(page, server)
    page.wait_for_selector("body[data-layouts]")
    with page.expect_download() as dl:
        page.click("#svg-btn")
    svg = ET.fromstring(open(dl.value.path(), encoding="utf-8").read())
    sw, sh = int(svg.get("width")), int(svg.get("height"))
    with page.expect_download() as dl:
        page.click("#png-btn")
    assert dl.value.suggested_filename == "rtxviz-step-0.png"
    data = open(dl.value.path(), "rb").read()
    w, h, depth, _, _ = read_png(data)
    assert (w, h) == (2 * sw, 2 * sh) and depth == 8
    # what it shows: decoded by the browser in a blank page, the pixels hold the param and output node fills
    colours = page.evaluate("""async b64 => {
      const img = new Image();
      img.src = 'data:image/png;base64,' + b64;
      await img.decode();
      const c = document.createElement('canvas');
      c.width = img.width; c.height = img.height;
      const x = c.getContext('2d');
      x.drawImage(img, 0, 0);
      const d = x.getImageData(0, 0, c.width, c.height).data;
      const seen = new Set(); let ink = 0;
      for (let i = 0; i < d.length; i += 4) {
        seen.add(`${d[i]},${d[i + 1]},${d[i + 2]}`);
        if (d[i] < 250 || d[i + 1] < 250 || d[i + 2] < 250) ink++;
      }
      return { seen: [...seen], ink: ink / (d.length / 4), alpha: d[3] };
    }""", base64.b64encode(data).decode())
    seen = {tuple(map(int, c.split(","))) for c in colours["seen"]}
    assert PARAM_FILL in seen and OUTPUT_FILL in seen
    assert colours["ink"] > 0.05  # not a blank image
    assert colours["alpha"] == 255  # a white background, not transparency
    assert page.errors == []


def test_png_export_works_under_the_pages_own_csp(strict_page, server):
    """The page's CSP (img-src 'self' data:) allows the data: image the export rasterises, and nothing taints."""
    page = strict_page
    post_events(server, "known", known_graph())
    page.goto(server + "/")
    page.wait_for_selector(f'#counts[data-total="{N_NODES}"]')
    page.wait_for_selector(f"g.vnode >> nth={N_NODES - 1}")
    with page.expect_download() as dl:
        page.click("#png-btn")
    w, h, _, _, _ = read_png(open(dl.value.path(), "rb").read())
    assert w > 100 and h > 100
    assert page.errors == []
