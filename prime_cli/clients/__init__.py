"""clients layer (see DESIGN.md)."""
