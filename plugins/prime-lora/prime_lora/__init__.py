"""prime-lora: the LoRA RL trainer plugin for `prime train` (see docs/trainer.md)."""

__version__ = "0.1.0"
