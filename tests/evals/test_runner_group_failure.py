"""A group whose task raises (a full disk while writing its rows, a bug in an environment's scoring) ends the
run `failed` with the error named in one line and the resume command; the rows already written stay and
`-R` runs exactly the missing rollouts. In process, through the console script's `main`, against the
scripted server; the failing write is injected into the first group."""

from __future__ import annotations

import json
from collections import Counter

from prime_cli.evals import run_files
from tests.evals.cli_support import only_run_dir, read_rows
from tests.support.cli import main_in_process
from tests.support.scripted_server import ScriptedOpenAIServer


def test_a_group_that_raises_fails_the_run_and_resume_runs_exactly_the_missing_rollouts(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write = run_files.RunFiles.write
    calls = Counter()

    def full_disk_once(self, row):
        calls["write"] += 1
        if calls["write"] == 1:
            raise OSError(28, "No space left on device")
        return write(self, row)

    monkeypatch.setattr(run_files.RunFiles, "write", full_disk_once)
    with ScriptedOpenAIServer() as server:
        args = ["eval", "run", "reverse-text", "-m", "m", "-b", server.url, "-n", "12", "-r", "2", "-c", "2", "-s"]
        code, out, err = main_in_process(args, capsys)
        run_dir = only_run_dir(tmp_path / "outputs")
        meta = json.loads((run_dir / "metadata.json").read_text())
        assert code == 1 and meta["status"] == "failed", (code, meta["status"], err[-2000:])
        errors = [line for line in err.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and "No space left on device" in errors[0], err[-2000:]
        assert "Traceback" not in err and "never retrieved" not in err
        assert "-R " in out + err  # the resume command
        kept = read_rows(run_dir)
        assert len(kept) < 24
        monkeypatch.setattr(run_files.RunFiles, "write", write)
        code, out, err = main_in_process(["eval", "run", "reverse-text", "-R", str(run_dir), "-b", server.url], capsys)
    assert code == 0, err[-2000:]
    rows = read_rows(run_dir)
    pairs = Counter((row["example_id"], row["rollout_idx"]) for row in rows)
    assert len(pairs) == 24 and set(pairs.values()) == {1}
    assert json.loads((run_dir / "metadata.json").read_text())["status"] == "completed"
