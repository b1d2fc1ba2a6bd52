"""gepa layer (see DESIGN.md)."""
