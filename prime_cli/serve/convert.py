"""Child process: turn the SmolLM2 GGUF into an fp32 Hugging Face folder.

Run as `python -m prime_cli.serve.convert GGUF_PATH OUT_DIR`. Kept out of the parent so that
torch and transformers are never imported by the prime process itself.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def convert(gguf_path: Path, out_dir: Path) -> None:
    import torch  # lazy: optional dependency
    from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: optional dependency

    folder, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, torch_dtype=torch.float32)
    # the weights are already dequantized; save_pretrained refuses while these say "quantized"
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    _portable_tokenizer_config(out_dir / "tokenizer_config.json")


def _portable_tokenizer_config(path: Path) -> None:
    """transformers 5 writes `TokenizersBackend`, which transformers 4 cannot load; both read this."""
    config = json.loads(path.read_text())
    if config.get("tokenizer_class") == "TokenizersBackend":
        config["tokenizer_class"] = "PreTrainedTokenizerFast"
    path.write_text(json.dumps(config, indent=2) + "\n")


if __name__ == "__main__":
    convert(Path(sys.argv[1]), Path(sys.argv[2]))
