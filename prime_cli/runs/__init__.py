"""What every kind of run (eval, GEPA) shares on disk and nothing engine-specific: run ids, the run log,
metadata.json and what a folder named on the command line holds. Engines import it; it imports no
engine (see the import-linter contracts in pyproject.toml)."""
