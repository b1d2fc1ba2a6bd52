"""Trainer discovery through the `prime.trainers` entry points: listing, choosing, API version checks."""

import inspect
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from prime_cli.cli.main import app
from prime_cli.train import plugins
from prime_cli.train.config import RLConfig
from prime_cli.train.contract import API_VERSION, TrainerPlugin
from prime_cli.train.errors import TrainConfigError
from prime_cli.train.plugins import list_trainers, load_trainer
from tests.train.support import write

SHORT_CONFIG = 'model = "local"\nbatch_size = 8\nrollouts_per_example = 4\n[[env]]\nid = "reverse-text"\n'

FAKE_MODULE = """
from prime_cli.train.config import RLConfig

class Fake:
    name = "fake"
    api_version = 2
    version = "0.1"
    config_model = RLConfig
    def run(self, config, output_dir, resume_step=None, force=False, part=None, node_rank=0):
        print(f"fake trainer ran: force={force} part={part} node_rank={node_rank}")
        return 0
    def run_slurm(self, config, output_dir, resume_step, dry_run, template, echo):
        return 0

class Old(Fake):
    api_version = 1
    def run(self, config, output_dir, resume_step=None):
        return 0

class Newer(Fake):
    api_version = 3

class Nameless:
    api_version = 2
    version = "0.1"
    config_model = RLConfig
    def run(self, config, output_dir, resume_step=None, force=False, part=None, node_rank=0):
        return 0

plugin = Fake()
old = Old()
newer = Newer()
nameless = Nameless()
raise_on_import = None
"""


@pytest.fixture
def fake_dist(tmp_path, monkeypatch):
    """A distribution `fake-trainer 0.1` with five trainers: fake, old (API 1), newer (API 3), broken (import
    fails), nameless (no `name`, no `run_slurm`)."""
    info = tmp_path / "fake_trainer-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-trainer\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent("""
        [prime.trainers]
        fake = fake_trainer_mod:plugin
        old = fake_trainer_mod:old
        newer = fake_trainer_mod:newer
        broken = fake_trainer_broken:plugin
        nameless = fake_trainer_mod:nameless
    """))
    (tmp_path / "fake_trainer_mod.py").write_text(FAKE_MODULE)
    (tmp_path / "fake_trainer_broken.py").write_text("raise ImportError('needs a GPU library')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("fake_trainer_mod", "fake_trainer_broken"):
        sys.modules.pop(name, None)


def test_list_includes_fake_and_real_without_importing(fake_dist):
    found = {t.name: t for t in list_trainers()}
    assert found["fake"] == ("fake", "fake-trainer", "0.1", "fake_trainer_mod:plugin")
    assert found["lora"].package == "prime-lora" and found["lora"].value == "prime_lora.plugin:plugin"
    assert "fake_trainer_mod" not in sys.modules


def test_load_by_name(fake_dist):
    plugin = load_trainer("fake")
    assert plugin.name == "fake" and plugin.config_model is RLConfig


def test_several_installed_needs_a_name(fake_dist):
    with pytest.raises(TrainConfigError, match=r"several trainers are installed \(.*fake.*lora.*\): pick one with --trainer NAME"):
        load_trainer(None)


def test_unknown_name_suggests_a_close_one(fake_dist):
    with pytest.raises(TrainConfigError, match=r"no trainer named 'fak' \(installed: .*\); did you mean 'fake'\?"):
        load_trainer("fak")


def test_api_version_mismatch(fake_dist):
    with pytest.raises(TrainConfigError, match=r"^trainer plugin 'old' \(fake-trainer 0.1\) speaks plugin API 1; "
                                               r"prime needs 2: upgrade it with `pip install -U fake-trainer`$"):
        load_trainer("old")
    with pytest.raises(TrainConfigError, match=r"^trainer plugin 'newer' \(fake-trainer 0.1\) speaks plugin API 3; "
                                               r"prime needs 2: upgrade prime, or install a fake-trainer release made "
                                               r"for plugin API 2$"):
        load_trainer("newer")


def test_a_plugin_of_the_old_api_is_refused_by_prime_train_in_one_line(fake_dist, tmp_path):
    config = write(tmp_path, SHORT_CONFIG)
    result = CliRunner().invoke(app, ["train", str(config), "--trainer", "old", "--dry-run"])
    assert result.exit_code == 2, result.output
    assert result.stderr == ("error: trainer plugin 'old' (fake-trainer 0.1) speaks plugin API 1; prime needs 2: "
                             "upgrade it with `pip install -U fake-trainer`\n")


def test_prime_train_passes_force_part_and_node_rank_to_the_plugin(fake_dist, tmp_path):
    config = write(tmp_path, SHORT_CONFIG)
    result = CliRunner().invoke(app, ["train", str(config), "--trainer", "fake", "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "fake trainer ran: force=False part=None node_rank=0" in result.stdout
    result = CliRunner().invoke(app, ["train", str(config), "--trainer", "fake", "-o", str(tmp_path / "out"),
                                      "--force", "--part", "trainer"])
    assert result.exit_code == 0, result.output
    assert "fake trainer ran: force=True part=trainer node_rank=0" in result.stdout


def test_the_contract_declares_every_member_prime_train_uses():
    assert API_VERSION == 2
    declared = set(TrainerPlugin.__annotations__) | {
        name for name, value in vars(TrainerPlugin).items() if inspect.isfunction(value) and not name.startswith("_")}
    assert declared == {"name", "api_version", "version", "config_model", "run", "run_slurm"}
    run = inspect.signature(TrainerPlugin.run).parameters
    assert list(run) == ["self", "config", "output_dir", "resume_step", "force", "part", "node_rank"]


def test_a_plugin_missing_a_member_of_the_contract_is_refused(fake_dist):
    assert isinstance(load_trainer("fake"), TrainerPlugin)
    with pytest.raises(TrainConfigError, match=r"trainer 'nameless' \(fake-trainer 0.1\) is not a valid trainer plugin "
                                               r"\(it has no name, run_slurm\)"):
        load_trainer("nameless")


def test_import_failure_is_one_line(fake_dist):
    with pytest.raises(TrainConfigError, match=r"trainer 'broken' .* failed to import .*needs a GPU library"):
        load_trainer("broken")


def test_none_installed(monkeypatch):
    monkeypatch.setattr(plugins, "entry_points", lambda group: [])
    assert list_trainers() == []
    with pytest.raises(TrainConfigError, match=r"no trainer plugin is installed: .*pip install -e plugins/prime-lora.*make setup"):
        load_trainer(None)


def test_the_only_installed_trainer_is_the_default(monkeypatch):
    real = plugins.entry_points
    monkeypatch.setattr(plugins, "entry_points", lambda group: [ep for ep in real(group=group) if ep.name == "lora"])
    plugin = load_trainer(None)
    assert plugin.name == "lora" and plugin.api_version == API_VERSION and callable(plugin.run)
    assert isinstance(plugin, TrainerPlugin)
    assert issubclass(plugin.config_model, RLConfig)


def test_listing_does_not_import_prime_lora():
    code = ("import sys\nfrom prime_cli.train.plugins import list_trainers\n"
            "names = [t.name for t in list_trainers()]\nassert 'lora' in names, names\n"
            "print('IMPORTED' if 'prime_lora' in sys.modules else 'CLEAN')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "CLEAN"
