"""serve layer (see DESIGN.md)."""
