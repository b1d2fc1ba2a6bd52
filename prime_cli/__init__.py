"""prime: write, evaluate, optimise and train RL environments for language models."""

__version__ = "0.1.0"

import logging as _logging

# Library logging goes to the run's eval.log (attached per run), never to stderr by accident.
_logging.getLogger("prime_cli").addHandler(_logging.NullHandler())
