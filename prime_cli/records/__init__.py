"""Run records: how each kind of run (eval, GEPA, training) is laid out, written and read on disk."""
