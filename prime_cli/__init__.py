"""prime: write, evaluate, optimise and train RL environments for language models."""

__version__ = "0.1.0"
