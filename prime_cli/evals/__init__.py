"""evals layer (see DESIGN.md)."""
