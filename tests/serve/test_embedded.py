import json

from prime_cli.serve import embedded
from prime_cli.serve.convert import _portable_tokenizer_config


def fake_converted(folder):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights" * 100)
    embedded._write_manifest(folder, embedded.Path("x.gguf"))
    return folder


def test_a_folder_matching_its_manifest_verifies(tmp_path):
    assert embedded.verify_model_folder(fake_converted(tmp_path / "m")) is None


def test_damage_is_detected(tmp_path):
    folder = fake_converted(tmp_path / "m")
    data = bytearray((folder / "model.safetensors").read_bytes())
    data[3] ^= 1  # same size, different content
    (folder / "model.safetensors").write_bytes(bytes(data))
    assert "checksum" in embedded.verify_model_folder(folder)
    (folder / "model.safetensors").unlink()
    assert "missing" in embedded.verify_model_folder(folder)


def test_unconverted_and_foreign_folders_are_not_accepted(tmp_path):
    assert embedded.verify_model_folder(tmp_path / "nothing") == "not converted yet"
    folder = fake_converted(tmp_path / "m")
    manifest = json.loads((folder / embedded.MANIFEST).read_text())
    (folder / embedded.MANIFEST).write_text(json.dumps({**manifest, "format": 99}))
    assert embedded.verify_model_folder(folder) == "made by another prime version"


def test_cache_dir_follows_prime_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIME_CACHE_DIR", str(tmp_path))
    assert embedded.embedded_model_dir() == tmp_path / "models" / "smollm2-135m-instruct"


def test_tokenizer_config_is_made_loadable_by_transformers_4(tmp_path):
    path = tmp_path / "tokenizer_config.json"
    path.write_text(json.dumps({"tokenizer_class": "TokenizersBackend", "eos_token": "<|im_end|>"}))
    _portable_tokenizer_config(path)
    assert json.loads(path.read_text()) == {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>"}


def test_chat_template_renders_chatml_with_tool_calls():
    from importlib import resources

    import jinja2

    source = resources.files("prime_cli.serve").joinpath("chat_template.jinja").read_text()
    template = jinja2.Environment().from_string(source)
    plain = template.render(messages=[{"role": "user", "content": "hi"}], add_generation_prompt=True)
    assert plain == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                     "<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "add 1 and 2"}]},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
    ]
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    text = template.render(messages=messages, tools=tools, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nBe brief.\n\nYou can call functions.")
    assert '{"name": "add", "parameters": {"type": "object"}}' in text
    assert '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call><|im_end|>' in text
    assert "<|im_start|>user\n<tool_response>\n3\n</tool_response><|im_end|>" in text
    assert "add 1 and 2" in text and text.endswith("<|im_start|>assistant\n")
