// PNG export: the SVG export (view.ts's svgDocument) rasterised in the page through a canvas. The image is loaded
// from a data: URL (the page's CSP allows data: images, not blob: ones), so the canvas is never tainted.

/** Canvas sides past this are refused by Chromium and Firefox (a blank image); the scale is lowered to fit. */
export const MAX_SIDE = 16384;
/** ... and so is an area past this (Chromium: 268 million pixels). */
export const MAX_AREA = 268_000_000;

/** The scale a PNG of a `w` x `h` drawing is rasterised at: `wanted` (2: sharp on high-density screens) unless the
 * canvas would pass the browsers' limits, then the largest that fits.
 *
 * pngScale(800, 600, 2) === 2; pngScale(20000, 100, 2) === 16384 / 20000
 */
export function pngScale(w: number, h: number, wanted = 2): number {
  const side = MAX_SIDE / Math.max(w, h);
  const area = Math.sqrt(MAX_AREA / Math.max(1, w * h));
  return Math.min(wanted, side, area);
}

/** Rasterise a standalone SVG document of `w` x `h` user units at `scale` on a white background. */
export async function svgToPng(svgText: string, w: number, h: number, scale: number): Promise<Blob> {
  const img = new Image();
  img.decoding = "async";
  const loaded = new Promise<void>((resolve, reject) => {
    img.onload = () => resolve();
    img.onerror = () => reject(new Error(`PNG export: the SVG (${w} x ${h}) could not be loaded as an image`));
  });
  img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(svgText);
  await loaded;
  const canvas = document.createElement("canvas");
  canvas.width = Math.max(1, Math.round(w * scale));
  canvas.height = Math.max(1, Math.round(h * scale));
  const ctx = canvas.getContext("2d");
  if (!ctx) throw new Error(`PNG export: no 2D canvas for ${canvas.width} x ${canvas.height} pixels`);
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.drawImage(img, 0, 0, canvas.width, canvas.height);
  return new Promise<Blob>((resolve, reject) => canvas.toBlob(
    (b) => (b ? resolve(b) : reject(new Error(`PNG export: the canvas (${canvas.width} x ${canvas.height}) gave no PNG`))),
    "image/png"));
}
