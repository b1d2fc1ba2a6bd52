"""`prime train CONFIG`: LoRA RL with an installed trainer plugin (config checks and plan here; the run in the plugin)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from .errors import fail, fail_error

if TYPE_CHECKING:
    from prime_cli.train.contract import TrainerPlugin

PARTS = ("inference", "trainer", "orchestrator")

EPILOG = ("Example: prime train configs/rl/reverse-text-cpu.toml   (check first with --dry-run; "
          "override a key with --set trainer.optim.lr=3e-4; resume with --resume-step 10). SFT and distillation "
          "configs: configs/sft/ and configs/rl/ (docs/training.md, Beyond RL)")


def train(
    config_words: list[str] | None = typer.Argument(None, metavar="CONFIG", help="Training config TOML (`@ CONFIG`, prime-rl's spelling, also reads it): the prime-rl v0.4 shape ([model], [trainer], [orchestrator], [[orchestrator.env]], [inference]), prime-rl's SFT shape ([data], [[data.source]]), the short hosted shape (model, max_steps, batch_size, rollouts_per_example, [sampling], [[env]]) or the simplified prime-rl shape (model_name, num_gpus, learning_rate, lora_rank); every key is listed in docs/trainer.md. Examples in configs/rl/ and configs/sft/."),
    trainer: str | None = typer.Option(None, "--trainer", "-t", help="Trainer plugin to use (see --list). Default: the only installed one."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Check the config, the environments and the plugin, print the resolved config and the process/device plan, and exit without training. A model not on this machine (not local, a folder or in the Hugging Face cache) is only a note here; a real run refuses it."),
    list_trainers: bool = typer.Option(False, "--list", help="List the installed trainer plugins (name, package, version) and exit."),
    resume_step: int | None = typer.Option(None, "--resume-step", "--trainer.ckpt.resume-step", min=1, help="Resume from checkpoints/step_N in the output directory (later steps are discarded). --trainer.ckpt.resume-step is the prime-rl spelling."),
    overrides: list[str] | None = typer.Option(None, "--set", metavar="KEY=VALUE", help="Override one config key (repeatable), e.g. --set trainer.optim.lr=3e-4 or --set orchestrator.env[0].args.num_train_examples=100. VALUE is read as TOML when it parses (numbers, true, [1, 2]), else as a string."),
    output_dir: str | None = typer.Option(None, "-o", "--output-dir", help="Output directory (weights/, checkpoints/, logs/, metrics.jsonl). Default: output_dir of the config, else outputs/rl/<first environment id> (outputs/sft/... for SFT). A fresh start refuses a folder holding files it would write that no prime run wrote (or a run that trained), and lists them."),
    force: bool = typer.Option(False, "--force", help="On a fresh start, delete exactly the entries of the output directory that the refusal lists (nothing else), then train."),
    part: str | None = typer.Option(None, "--part", metavar="inference|trainer|orchestrator", help="Run one part of the run alone, on this node (several machines: docs/trainer.md, Scaling). inference: vLLM on inference.host:port until Ctrl-C; trainer: the trainer, owning output_dir; orchestrator: rollouts from the servers in orchestrator.client.base_url, once the trainer part has prepared output_dir (a folder both nodes see)."),
    slurm_template: Path | None = typer.Option(None, "--slurm-template", metavar="PATH", help="With a [slurm] table: a Jinja2 sbatch template instead of prime-lora's (its variables: docs/trainer.md, Scaling)."),
    node_rank: int = typer.Option(0, "--node-rank", min=0, help="With --part trainer and [deployment] num_train_nodes > 1: this node's place among the trainer nodes (0 owns output_dir and hosts nothing else; torchrun's rendezvous is at deployment.rdzv_endpoint)."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="When an environment fails to load, also print the traceback of its error."),
) -> None:
    """Train a LoRA adapter with RL on environments, or by SFT, or by distilling a teacher.

    The installed trainer plugin (see --list) runs vLLM inference, an orchestrator that samples the
    environments, and a trainer, on the devices the config names (or the CPU without CUDA). An SFT config
    ([data] seq_len, batch_size and [[data.source]] dataset = a JSONL/Parquet file, a dataset folder or saved
    eval runs) fine-tunes on the assistant turns without vLLM; [model] adapter = PATH starts from an adapter;
    [trainer.loss] teacher_tau with [orchestrator.teacher_model] distils a teacher on the policy's own samples.

    The config is validated (keys, batch divisibility, sequence lengths and max_tokens, GPU layout, the
    output folder, the model's weights on this machine) and every environment is loaded before anything
    starts; a mistake is reported as one `error:` line.
    """
    from prime_cli.train.errors import TrainConfigError  # lazy: start-up

    try:
        if list_trainers:
            _print_trainers()
            raise typer.Exit(0)
        config_path = _config_path(config_words or [])
        if config_path is None:
            fail("give a config file: prime train CONFIG.toml (examples in configs/rl/; see prime train --help)")
        if force and resume_step is not None:
            fail("--force is for a fresh start; a resume (--resume-step) deletes only this run's later steps")
        if part is not None and part not in PARTS:
            fail(f"--part {part}: choose one of {', '.join(PARTS)} (or leave it out to run every part here)")
        if force and part in ("inference", "orchestrator"):
            fail(f"--force belongs to the trainer part, which owns the output folder, not to --part {part}")
        config, plugin, notes, unchecked = _prepare(config_path, trainer, overrides or [], output_dir, dry_run)
    except TrainConfigError as exc:
        fail_error(exc, verbose)
    slurm = getattr(config, "slurm", None) is not None and part is None
    if slurm_template is not None and not slurm:
        fail("--slurm-template is for a config with a [slurm] table (and no --part)")
    if slurm_template is not None and not slurm_template.is_file():
        fail(f"--slurm-template {slurm_template}: no such file (a Jinja2 sbatch template)")
    if dry_run:
        from prime_cli.train.folder_notes import output_dir_notes  # lazy: start-up

        _print_dry_run(config, plugin, notes + output_dir_notes(config, resume_step), unchecked)
        raise typer.Exit(_slurm(plugin, config, resume_step, True, slurm_template) if slurm else 0)
    _check_part_flags(config, part, node_rank, slurm)
    if slurm:
        raise typer.Exit(_slurm(plugin, config, resume_step, False, slurm_template))
    for note in notes:  # what the dry-run plan would say about the config, once at the start
        typer.echo(note, err=True)
    try:
        code = plugin.run(config, Path(config.output_dir), resume_step, force=force, part=part, node_rank=node_rank)
    except TrainConfigError as exc:  # the plugin cannot do what a flag asked
        fail_error(exc, verbose)
    raise typer.Exit(code)


HOSTED = ("prime has no hosted training service (`prime train submit` is a hosted platform's command): "
          "`prime train {config}` runs that config here, on this machine (check it first with --dry-run)")


def _config_path(words: list[str]) -> Path | None:
    """The config of `prime train CONFIG`, or of prime-rl's `@ CONFIG`; `submit CONFIG` (hosted) is refused."""
    if words and words[0] == "submit" and not (len(words) == 1 and Path("submit").is_file()):
        fail(HOSTED.format(config=words[1] if len(words) == 2 else "CONFIG"))
    if words and words[0] == "@":
        words = [word for word in words[1:] if word != "@"]
        if not words:
            fail("@ needs a config after it: prime train @ CONFIG.toml (or prime train CONFIG.toml)")
    if len(words) > 1:
        fail(f"prime train reads one config, got {len(words)} ({' '.join(words)}): merge them into one file, "
             "or change single keys with --set KEY=VALUE")
    return Path(words[0]) if words else None


def _check_part_flags(config, part: str | None, node_rank: int, slurm: bool) -> None:
    nodes = config.deployment.num_train_nodes
    if node_rank and (part != "trainer" or node_rank >= nodes):
        fail(f"--node-rank {node_rank} is for --part trainer with [deployment] num_train_nodes above it "
             f"(num_train_nodes is {nodes}): give 0..{nodes - 1} on the trainer nodes")
    if nodes > 1 and part is None and not slurm:
        fail(f"[deployment] num_train_nodes is {nodes}: start each part on its node with --part (trainer nodes: "
             "--part trainer --node-rank N), or add a [slurm] table; see docs/trainer.md, Scaling")


def _slurm(plugin: TrainerPlugin, config, resume_step: int | None, dry_run: bool, template: Path | None) -> int:
    from prime_cli.train.errors import TrainConfigError  # lazy: start-up

    try:
        return plugin.run_slurm(config, Path(config.output_dir), resume_step, dry_run, template, typer.echo)
    except TrainConfigError as exc:  # the plugin cannot write SLURM jobs
        fail_error(exc)


def _prepare(config_path: Path, trainer: str | None, overrides: list[str], output_dir: str | None, dry_run: bool):
    """The validated config (in the plugin's model), the plugin, notes for the dry-run plan, and the notes on
    environments a dry run could not load here (a judge's key not set)."""
    from prime_cli.train.devices import (  # lazy: start-up
        check_devices,
        gpu_shortage,
        has_cuda,
        visible_gpu_count,
    )
    from prime_cli.train.errors import TrainConfigError  # lazy: start-up
    from prime_cli.train.loading import (  # lazy: start-up
        check_environments,
        config_notes,
        load_train_config_with_notes,
        validate_config,
    )
    from prime_cli.train.plan_size import cpu_size_note  # lazy: start-up
    from prime_cli.train.plugins import load_trainer  # lazy: start-up
    from prime_cli.train.preflight import (  # lazy: start-up
        check_adapters,
        check_data_sources,
        check_eval_max_tokens,
        check_lora_targets,
        check_model,
        check_output_dir,
        env_file_variables,
    )

    config, load_notes = load_train_config_with_notes(config_path, overrides, output_dir)
    check_output_dir(config.output_dir, from_flag=output_dir is not None)
    cuda = has_cuda()
    check_devices(config, cuda)
    shortage = gpu_shortage(config, visible_gpu_count()) if cuda else None
    if shortage and not dry_run:
        raise TrainConfigError(shortage)
    model_notes = check_model(config, dry_run) + check_data_sources(config, dry_run) + check_adapters(config, dry_run)
    check_lora_targets(config)
    with env_file_variables(config.env_file):  # a judge's key may come from env_file, as in the run's parts
        env_notes = check_environments(config, dry_run)
    check_eval_max_tokens(config)
    plugin = load_trainer(trainer)
    config = validate_config(config.model_dump(), plugin.config_model, str(config_path))
    size_note = cpu_size_note(config, cuda)
    notes = (load_notes + ([shortage] if shortage else []) + model_notes + env_notes
             + ([size_note] if size_note else []) + config_notes(config))
    return config, plugin, notes, env_notes


def _print_trainers() -> None:
    from prime_cli.train.plugins import INSTALL_HINT, list_trainers  # lazy: start-up

    found = list_trainers()
    if not found:
        typer.echo(f"No trainer plugin is installed: {INSTALL_HINT}.")
        return
    rows = [("NAME", "PACKAGE", "VERSION", "ENTRY POINT")] + [tuple(t) for t in found]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def _print_dry_run(config, plugin: TrainerPlugin, notes: list[str], unchecked: list[str]) -> None:
    from prime_cli.train.devices import has_cuda  # lazy: start-up
    from prime_cli.train.plan import build_plan, render_plan  # lazy: start-up
    from prime_cli.train.tomlio import dumps  # lazy: start-up

    cuda = has_cuda()
    typer.echo(f"Trainer: {plugin.name} {plugin.version}")
    typer.echo("Resolved config:")
    typer.echo("\n".join(f"  {line}" if line else "" for line in dumps(config.model_dump()).splitlines()))
    typer.echo("")
    typer.echo(render_plan(config, build_plan(config, cuda), cuda, notes))
    typer.echo("")
    if unchecked:  # an environment that could not be loaded here: OK only as far as its note says
        typer.echo("Dry run: config and trainer are OK, the environments as far as the warnings above say; "
                   "nothing was started.")
    else:
        typer.echo("Dry run: config, environments and trainer are OK; nothing was started.")
