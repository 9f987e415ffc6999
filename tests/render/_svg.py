"""Helpers to read graphviz SVG with xml.etree."""

from __future__ import annotations

import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"


def parse(svg: str | bytes) -> dict:
    """{"nodes": {dot id: {"class", "id", "texts", "fill", "stroke"}}, "edges": {(a, b): texts},
    "clusters": {title: label}}."""
    root = ET.fromstring(svg)
    out: dict = {"nodes": {}, "edges": {}, "clusters": {}}
    for g in root.iter(f"{NS}g"):
        cls = (g.get("class") or "").split()
        title_el = g.find(f"{NS}title")
        title = title_el.text if title_el is not None else None
        texts = [t.text or "" for t in g.iter(f"{NS}text")]
        if "node" in cls:
            shape = next((el for el in g.iter() if el.tag in (f"{NS}polygon", f"{NS}path", f"{NS}ellipse")), None)
            out["nodes"][title] = {"class": cls, "id": g.get("id"), "texts": texts,
                                   "fill": None if shape is None else shape.get("fill"),
                                   "stroke": None if shape is None else shape.get("stroke")}
        elif "edge" in cls:
            a, b = title.split("->")
            out["edges"][(a, b)] = texts
        elif "cluster" in cls:
            out["clusters"][title] = texts[0] if texts else None
    return out
