"""results layer (see DESIGN.md): reads what runs saved (eval, GEPA and training runs). No engine,
no run writer, no model access; it may write caches (the results side index, converted foreign runs)."""
