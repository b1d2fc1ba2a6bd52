"""`prime serve`: serve a local model with vLLM (the embedded default)."""

from __future__ import annotations

import typer

from .errors import fail


def serve(
    model: str | None = typer.Argument(None, help="A Hugging Face model folder, or `local-moe` (a small Mixture-of-Experts model upcycled from the embedded one). Default: the embedded SmolLM2-135M-Instruct (converted once into ~/.cache/prime, or $PRIME_CACHE_DIR)."),
    port: int = typer.Option(8000, "--port", "-p", help="Port to listen on."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (0.0.0.0 to serve other machines)."),
    served_model_name: str | None = typer.Option(None, "--served-model-name", help="Model id clients send. Default: SmolLM2-135M-Instruct, or the folder's name."),
    enable_lora: bool = typer.Option(False, "--enable-lora", help="Serve LoRA adapters, loadable at run time (POST /v1/load_lora_adapter)."),
    max_lora_rank: int = typer.Option(16, "--max-lora-rank", help="Largest LoRA rank accepted (with --enable-lora)."),
    max_loras: int = typer.Option(1, "--max-loras", help="Adapters held at once (with --enable-lora)."),
    max_model_len: int = typer.Option(4096, "--max-model-len", help="Context length (prompt + completion) in tokens."),
    gpu_memory_utilization: float = typer.Option(0.85, "--gpu-memory-utilization", help="GPU only: fraction of GPU memory vLLM may use."),
    kv_cache_gib: int = typer.Option(1, "--kv-cache-gib", help="CPU only: GiB of RAM for the KV cache (VLLM_CPU_KVCACHE_SPACE)."),
    compile_model: bool = typer.Option(False, "--compile", help="CPU only: torch.compile the model (minutes at start on small machines; eager by default)."),
    loras: list[str] | None = typer.Option(None, "--lora", help="Serve a PEFT adapter (e.g. a `prime train` weights/step_N folder) as model NAME: --lora NAME=PATH (repeatable). Then: prime eval run ENV -m NAME -b URL."),
    vllm_args: list[str] | None = typer.Option(None, "--vllm-arg", help="Extra argument passed to vLLM as is (repeatable), e.g. --vllm-arg=--seed=1."),
) -> None:
    """Serve a local model with vLLM's OpenAI-compatible server until Ctrl-C.

    `prime eval run ENV` (model `local`) uses this server while it runs; without one it starts a
    server for the run and stops it afterwards. Serving an already-running model reuses it.
    """
    import sys  # lazy: already loaded

    from rich.console import Console  # lazy: start-up

    from prime_cli.serve import ServeError  # lazy: start-up
    from prime_cli.serve.api import model_to_serve  # lazy: start-up
    from prime_cli.serve.api import serve as serve_model  # lazy: start-up
    from prime_cli.serve.errors import ServerDied  # lazy: start-up
    from prime_cli.serve.lora_runtime import vllm_lora_rank  # lazy: start-up
    from prime_cli.serve.model_dir import parse_lora_option  # lazy: start-up
    from prime_cli.serve.server import ServerOptions  # lazy: start-up

    console = Console(stderr=True, highlight=False)
    status_line = console.status("starting", spinner="dots")

    def status(message: str) -> None:
        console.print(f"[dim]{message}[/dim]")

    def tick(elapsed: float) -> None:
        status_line.update(f"starting vLLM ({elapsed:.0f} s; first start on CPU takes about a minute)")

    def on_ready(options: ServerOptions, pid: int | None, reused: bool) -> None:
        status_line.stop()
        verb = "already serving" if reused else "serving"
        console.print(f"[bold green]{verb}[/] {options.served_names[0]} at [bold]{options.url}[/] (pid {pid})")
        print(options.url, flush=True)
        if not reused:
            flag = "local-moe" if model == "local-moe" else "local"
            console.print(f"use it: prime eval run reverse-text -m {flag}   |   Ctrl-C stops it")

    try:
        model_path, names = model_to_serve(model, served_model_name, status)
        adapters = [parse_lora_option(value) for value in loras or []]
        max_lora_rank = max([max_lora_rank, *(vllm_lora_rank(rank) for _, _, rank in adapters)])
        options = ServerOptions(model_path=model_path, served_names=names, host=host, port=port,
                                loras={name: path for name, path, _ in adapters},
                                enable_lora=enable_lora, max_lora_rank=max_lora_rank, max_loras=max_loras,
                                max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
                                kv_cache_gib=kv_cache_gib, compile=compile_model, extra_args=list(vllm_args or []))
        status_line.start()
        code = serve_model(options, status, tick, on_ready)
    except ServerDied as exc:
        status_line.stop()
        fail(str(exc), code=1)
    except ServeError as exc:
        status_line.stop()
        fail(str(exc))
    except KeyboardInterrupt:
        status_line.stop()
        code = 130
    status_line.stop()
    sys.exit(code)
