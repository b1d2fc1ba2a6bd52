"""Trainer discovery through the `prime.trainers` entry points: listing, choosing, API version checks."""

import subprocess
import sys
import textwrap

import pytest

from prime_cli.train import plugins
from prime_cli.train.config import RLConfig
from prime_cli.train.contract import TrainerPlugin
from prime_cli.train.errors import TrainConfigError
from prime_cli.train.plugins import list_trainers, load_trainer

FAKE_MODULE = """
from prime_cli.train.config import RLConfig

class Fake:
    name = "fake"
    api_version = 1
    version = "0.1"
    config_model = RLConfig
    def run(self, config, output_dir, resume_step=None):
        return 0

class Old(Fake):
    api_version = 2

class Nameless:
    api_version = 1
    config_model = RLConfig
    def run(self, config, output_dir, resume_step=None):
        return 0

plugin = Fake()
old = Old()
nameless = Nameless()
raise_on_import = None
"""


@pytest.fixture
def fake_dist(tmp_path, monkeypatch):
    """A distribution `fake-trainer 0.1` with four trainers: fake, old (API 2), broken (import fails), nameless
    (no `name`)."""
    info = tmp_path / "fake_trainer-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-trainer\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent("""
        [prime.trainers]
        fake = fake_trainer_mod:plugin
        old = fake_trainer_mod:old
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
    with pytest.raises(TrainConfigError, match=r"trainer 'old' \(fake-trainer 0.1\) implements trainer plugin API "
                                               r"version 2, but this prime supports version 1"):
        load_trainer("old")


def test_a_plugin_missing_a_member_of_the_contract_is_refused(fake_dist):
    assert isinstance(load_trainer("fake"), TrainerPlugin)
    with pytest.raises(TrainConfigError, match=r"trainer 'nameless' \(fake-trainer 0.1\) is not a valid trainer plugin "
                                               r"\(it has no name\)"):
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
    assert plugin.name == "lora" and plugin.api_version == 1 and callable(plugin.run)
    assert isinstance(plugin, TrainerPlugin)
    assert issubclass(plugin.config_model, RLConfig)


def test_listing_does_not_import_prime_lora():
    code = ("import sys\nfrom prime_cli.train.plugins import list_trainers\n"
            "names = [t.name for t in list_trainers()]\nassert 'lora' in names, names\n"
            "print('IMPORTED' if 'prime_lora' in sys.modules else 'CLEAN')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "CLEAN"
