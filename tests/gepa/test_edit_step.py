"""The edit step (prime_cli/gepa/edit_step.py): a wrong instruction is taken out, and a search whose
reflections run dry tries it before stopping. Through `prime gepa run` against the scripted server."""

import json
import re

from prime_cli.gepa.instructions import instructions_with_evidence
from prime_cli.gepa.shown_rows import charged_rows
from prime_cli.gepa.state import Candidate
from tests.gepa import support
from tests.gepa.test_gepa_cli import gepa
from tests.support.scripted_server import ScriptedOpenAIServer

PLANTED = "Answer alpha rows in capitals."


def student(messages):
    system = support.system_text(messages)
    kind = re.search(r"kind:(\w+)", messages[-1]["content"]).group(1)
    answer = kind if f"kind {kind}" in system else "unknown"
    return answer.upper() if PLANTED in system and kind == "alpha" else answer


def examples_text(text):
    """What the reflection was shown besides its current prompt (copies of that prompt taken out)."""
    prompt = support.current_prompt(text)
    rest = text.split("```", 2)[2] if text.count("```") >= 2 else ""
    return rest.replace(prompt, "") if prompt else rest


def named_with_evidence(text, line):
    """The reflection names `line` outside the current prompt, beside an example it breaks."""
    shown = examples_text(text)
    return f'"{line}"' in shown and "### Output\n[assistant] ALPHA" in shown


def reflector(text):
    """Adds the kinds it sees (as support.reflector_reply); takes out the planted line only when it is named
    beside the evidence against it, as the edit step shows it."""
    prompt = support.current_prompt(text)
    lines = [line for line in prompt.splitlines() if not (line == PLANTED and named_with_evidence(text, line))]
    shown = examples_text(text)
    lines += [f"Answer kind {k} with its kind name." for k in dict.fromkeys(re.findall(r"kind:(\w+)", shown))
              if f"kind {k}" not in prompt]
    return "Analysis done.\n```\n" + "\n".join(lines).strip() + "\n```"


def reply(body):
    text = body["messages"][-1]["content"]
    return reflector(text) if body["model"] == "reflector" else student(body["messages"])


def run(tmp_path, server, *extra):
    args = json.dumps({"system_prompt": f"Answer the question.\n{PLANTED}"})
    return gepa(tmp_path, server.url, "-a", args, "-o", str(tmp_path / "run"), *extra)


def read(tmp_path, name):
    return [json.loads(line) for line in (tmp_path / "run" / name).read_text().splitlines()]


def test_a_wrong_instruction_in_the_seed_prompt_is_taken_out_by_an_edit_step(tmp_path):
    with ScriptedOpenAIServer(reply) as server:
        result = run(tmp_path, server, "-B", "200")
    assert result.returncode == 0, result.stderr
    best = (tmp_path / "run" / "best_prompt.txt").read_text()
    assert PLANTED not in best and "kind alpha" in best
    iterations = read(tmp_path, "iterations.jsonl")
    removed = [it for it in iterations if it["accepted"] and PLANTED not in it["child_prompt"]]
    assert removed and removed[0]["kind"] == "edit"
    assert f"iteration {removed[0]['iteration']}: edit of {removed[0]['parent_idx']} accepted as candidate" in result.stdout
    meta = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert meta["best_score"] == 1.0 and meta["total_metric_calls"] <= 200


def test_a_search_whose_reflections_run_dry_tries_an_edit_step_before_it_stops(tmp_path):
    edits = []

    def stubborn(body):
        """Reflections give the parent back; the second edit step takes out the planted line."""
        text = body["messages"][-1]["content"]
        if body["model"] != "reflector":
            return student(body["messages"])
        prompt = support.current_prompt(text)
        if "Its instructions, one by one" in text:
            edits.append(text)
            if len(edits) == 2:
                prompt = "\n".join(line for line in prompt.splitlines() if line != PLANTED)
        if "kind alpha" not in prompt:
            prompt += "\n" + "\n".join(f"Answer kind {k} with its kind name." for k in support.KINDS)
        return f"Same again.\n```\n{prompt}\n```"

    with ScriptedOpenAIServer(stubborn) as server:
        result = run(tmp_path, server, "-B", "400", "--max-reflection-failures", "2")
    assert result.returncode == 0, result.stderr
    iterations = read(tmp_path, "iterations.jsonl")
    kinds = [(it["kind"], it["accepted"]) for it in iterations if "reflection_reply" in it]
    # the first child (every kind) is accepted and its edit step gives nothing; reflections give nothing
    # until the 20 train rows are all paid for and two in a row bought nothing: the search is dry, and the
    # edit step tried then (the second) takes the planted line out, and the search goes on from there
    assert kinds[:2] == [("reflect", True), ("edit", False)] and ("edit", True) in kinds
    assert kinds.index(("edit", True)) == [k for k, _ in kinds].index("edit", 2)
    dry_edit = next(i for i, it in enumerate(iterations) if it["kind"] == "edit" and it["accepted"])
    assert [it["reason"] for it in iterations[dry_edit - 2:dry_edit]] == ["reflection returned the parent prompt unchanged"] * 2
    assert PLANTED not in (tmp_path / "run" / "best_prompt.txt").read_text()


def candidate(idx, prompt, parent, scores):
    return Candidate(idx, prompt, parent, scores, idx, 0)


def test_each_instruction_carries_the_rows_that_got_worse_when_it_came_in():
    seed = candidate(0, "Be brief.", None, [1.0, 0.0, 1.0, 0.0])
    child = candidate(1, "Be brief.\nUse capitals.", 0, [0.0, 1.0, 1.0, 1.0])
    grandchild = candidate(2, "Be brief.\nUse capitals.\nCount letters.", 1, [0.0, 1.0, 1.0, 1.0])
    items = instructions_with_evidence([seed, child, grandchild], 2)
    assert [(i.text, i.added_by, i.worse_rows) for i in items] == [
        ("Be brief.", None, []), ("Use capitals.", 1, [0]), ("Count letters.", 2, [])]


def test_a_parents_paid_rows_are_its_fully_charged_train_rows():
    charged = {f"train/{row}/{k}/p1" for row in (1, 2, 3, 4) for k in (0, 1)} | {"train/5/0/p1", "val/6/0/p1",
                                                                                 "train/7/0/p2", "train/7/1/p2"}
    assert charged_rows(charged, "p1", 2) == [1, 2, 3, 4]


def test_a_child_with_the_prompt_of_a_known_candidate_is_not_run(tmp_path):
    seed = "Answer the question."
    fixed = seed + "\n" + "\n".join(f"Answer kind {k} with its kind name." for k in support.KINDS[:2])

    def back_and_forth(body):
        """The seed's child is `fixed`; `fixed`'s child is the seed again."""
        if body["model"] != "reflector":
            return support.student_reply(body["messages"], None, None)
        child = seed if support.current_prompt(body["messages"][-1]["content"]) == fixed else fixed
        return f"Again.\n```\n{child}\n```"

    with ScriptedOpenAIServer(back_and_forth) as server:
        result = gepa(tmp_path, server.url, "-B", "120", "-o", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    repeats = [it for it in read(tmp_path, "iterations.jsonl") if it["reason"].startswith("same prompt as candidate")]
    # known before its rollouts: none is run (they would buy nothing), none is charged
    assert repeats and all(it["child_minibatch_scores"] == [] for it in repeats)


def test_a_resumed_parallel_run_skips_the_same_known_children(tmp_path, monkeypatch):
    from tests.gepa.test_engine import config, lines, search, without_time

    support.write_toy_env(tmp_path)
    monkeypatch.chdir(tmp_path)
    fixed = "\n".join(f"Answer kind {k} with its kind name." for k in support.KINDS[:3])
    constant = support.reflector(lambda messages, tools, sampling_args: f"ok\n```\n{fixed}\n```")
    cfg = lambda name: config(tmp_path / name, max_calls=200, parallel_proposals=2)  # noqa: E731
    search(cfg("full"), reflector=constant)

    def interrupt(line):
        if line["iteration"] == 1:
            raise KeyboardInterrupt

    first = search(cfg("part"), reflector=constant, on_commit=interrupt)[0]
    assert first.status == "cancelled"
    search(cfg("part"), reflector=constant, resume=True)
    full, part = lines(tmp_path / "full" / "iterations.jsonl"), lines(tmp_path / "part" / "iterations.jsonl")
    assert any(it["reason"].startswith("same prompt as candidate") for it in full)
    assert without_time(part) == without_time(full)


def test_the_edit_step_names_evidence_it_could_not_show_and_never_calls_a_seed_line_harmless():
    from prime_cli.gepa.edit_step import edit_prompt
    from prime_cli.gepa.instructions import Instruction

    items = [Instruction("Be brief.", None), Instruction("Use capitals.", 1, [0, 3]),
             Instruction("Count letters.", 2, [5]), Instruction("Say hi.", 3)]
    record = {"input": "q", "completion": "a", "answer": "b", "reward": 0.0, "metrics": {}}
    text = edit_prompt("Be brief.\nUse capitals.\nCount letters.\nSay hi.", items, {3: record}, [], [])
    assert '"Be brief." (in the seed prompt: no earlier prompt to compare with)' in text
    assert "2 validation row(s) got worse when it was added: Example 1, and 1 more not shown" in text
    assert '"Count letters." (added by candidate 2; 1 validation row(s) got worse when it was added (not shown))' in text
    assert '"Say hi." (added by candidate 3; no validation row got worse when it was added)' in text


def test_a_merge_does_not_bring_back_an_instruction_an_accepted_child_took_out():
    from prime_cli.gepa.instructions import merged_prompt

    seed = candidate(0, "Base.", None, [0.0] * 4)
    with_wrong = candidate(1, "Base.\nX\nW", 0, [1.0, 0.0, 0.0, 0.0])
    without = candidate(2, "Base.\nX", 1, [1.0, 1.0, 0.0, 0.0])  # W taken out
    other = candidate(3, "Base.\nY", 0, [0.0, 0.0, 1.0, 1.0])
    candidates = [seed, with_wrong, without, other]
    assert merged_prompt(candidates, 3, 1) == "Base.\nY\nX"
    assert merged_prompt(candidates, 3, 2) == "Base.\nY\nX"
    assert merged_prompt([candidate(0, "", None, [0.0]), candidate(1, "A\nA", 0, [1.0])], 0, 1) == "A"


def test_an_iteration_says_where_its_child_came_from():
    from prime_cli.records.gepa_run import proposal_origin

    assert proposal_origin({"parent_idx": 2}) == "parent 2"  # runs written before the kinds
    assert proposal_origin({"kind": "edit", "parent_idx": 4}) == "edit of 4"
    assert proposal_origin({"kind": "merge", "parent_idx": 4, "other_idx": 1}) == "merge of 4 + 1"
