"""API routers: ingest (events in), runs (REST reads), ws (live streams)."""
