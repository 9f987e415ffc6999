// The page's settings: its URL parameters, and whether it is the self-contained export (no server).
export const params = new URLSearchParams(location.search);

/** Set by the self-contained HTML export (rtxviz/export/html.py): the run is in the page, there is no server. */
export const EMBEDDED = (window as unknown as { RTXVIZ_EMBEDDED?: boolean }).RTXVIZ_EMBEDDED === true;

/** Set by the notebook widget (src/widget.ts): an embedded page whose live events the host window posts to it. */
export const HOSTED = EMBEDDED && (window as unknown as { RTXVIZ_HOSTED?: boolean }).RTXVIZ_HOSTED === true;
