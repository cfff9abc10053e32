"""ipywidgets explorers: controls wired to one builder of vlr_lib.viz each (thin by design)."""
