"""Where `prime gepa run`'s wall time went: metadata.json's `stages` and the -v line, through the real CLI."""

import json

from prime_cli.gepa.stages import ORDER
from tests.evals.cli_support import run_prime
from tests.gepa import support
from tests.gepa.test_gepa_cli import gepa, reply
from tests.support.scripted_server import ScriptedOpenAIServer

ROUNDING = 0.001  # each stage is rounded to the millisecond


def check_stages(stages: dict, *, seed_scored_here: bool) -> None:
    parts = [name for name in ORDER if name in stages]
    assert {"startup_s", "load_s", "setup_s", "search_s", "test_s", "finish_s"} <= set(parts)
    assert "local_server_s" not in stages  # no embedded model in this run
    assert all(stages[name] >= 0 for name in [*parts, "total_s"])
    assert 0 < sum(stages[name] for name in parts) <= stages["total_s"] + ROUNDING * len(parts)
    assert stages["search_s"] > 0 and stages["startup_s"] > 0
    if seed_scored_here:
        assert 0 < stages["seed_validation_s"] <= stages["search_s"]
    else:
        assert "seed_validation_s" not in stages


def test_metadata_has_the_stage_breakdown_and_verbose_prints_it(tmp_path):
    run = tmp_path / "run"
    with ScriptedOpenAIServer(reply) as server:
        first = gepa(tmp_path, server.url, "-B", "30", "--num-test", "5", "-o", str(run), "--plain", "-v")
        first_stages = json.loads((run / "metadata.json").read_text())["stages"]
        resumed = gepa(tmp_path, server.url, "-B", "48", "--num-test", "5", "-o", str(run), "--plain")
    assert first.returncode == 0 and resumed.returncode == 0, first.stderr + resumed.stderr
    check_stages(first_stages, seed_scored_here=True)
    line = next(text for text in first.stdout.splitlines() if text.startswith("time: "))
    assert line.startswith(f"time: {first_stages['total_s']:.2f} s in all: startup {first_stages['startup_s']:.2f} s, ")
    assert (f"search {first_stages['search_s']:.2f} s (seed validation {first_stages['seed_validation_s']:.2f} s of it), "
            f"test {first_stages['test_s']:.2f} s") in line
    # the resumed process measures itself: the seed was scored by the first one; no -v, no line
    check_stages(json.loads((run / "metadata.json").read_text())["stages"], seed_scored_here=False)
    assert "time: " not in resumed.stdout


def test_json_done_event_carries_the_stages(tmp_path):
    with ScriptedOpenAIServer(reply) as server:
        result = gepa(tmp_path, server.url, "-B", "30", "-o", str(tmp_path / "run"), "--json")
    assert result.returncode == 0, result.stderr
    done = json.loads(result.stdout.strip().splitlines()[-1])
    assert done["event"] == "done"
    assert done["stages"] == json.loads((tmp_path / "run" / "metadata.json").read_text())["stages"]


COUNTING = '''
from pathlib import Path

Path("imports.txt").open("a").write("imported\\n")
_load = load_environment


def load_environment(**kwargs):
    Path("loads.txt").open("a").write("loaded\\n")
    return _load(**kwargs)
'''


def test_the_environment_is_imported_and_loaded_once(tmp_path):
    support.write_toy_env(tmp_path)
    module = tmp_path / "environments" / "toy_gepa" / "toy_gepa.py"
    module.write_text(module.read_text() + COUNTING)
    with ScriptedOpenAIServer(reply) as server:  # not gepa(): it would write the toy module afresh
        result = run_prime(["gepa", "run", "toy-gepa", "-m", "student", "-M", "reflector", "-b", server.url, "-n", "20",
                            "-N", "10", "-B", "30", "--num-test", "5", "-o", str(tmp_path / "run"), "--plain"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Use it: prime eval run toy-gepa" in result.stdout  # the module was consulted again for this hint
    assert (tmp_path / "imports.txt").read_text() == "imported\n"
    assert (tmp_path / "loads.txt").read_text() == "loaded\n"
