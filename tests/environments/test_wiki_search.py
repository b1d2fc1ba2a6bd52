"""wiki-search: the HotpotQA reader, the FTS5 index and its queries, the tools, and both rewards."""

import json

import pytest
from wiki_search import WikiIndex, read_hotpotqa
from wiki_search.corpus import fts_query
from wiki_search.scoring import exact_match, token_f1

import prime_cli.envs as vf
from tests.environments.conftest import data_root
from tests.support.scripted_client import ScriptedClient, tool_call
from tests.support.scripted_server import ScriptedOpenAIServer


def corpus_file():
    return data_root() / "hotpotqa" / "dev_distractor_sample.jsonl"


@pytest.fixture(scope="module")
def index():
    pages, _ = read_hotpotqa(corpus_file())
    return WikiIndex(pages)


def test_reader_collects_every_context_page_once_and_every_question():
    pages, rows = read_hotpotqa(corpus_file())
    lines = [json.loads(line) for line in corpus_file().read_text().splitlines() if line.strip()]
    titles = {title for record in lines for title, _ in record["context"]}
    assert len(rows) == len(lines) and len(pages) == len(titles)
    assert len({p.page_id for p in pages}) == len(pages)
    first = rows[0]
    assert first["answer"] == lines[0]["answer"] and first["info"]["supporting_pages"]


def test_search_ranks_the_page_with_the_title_first(index):
    hits = index.search("Scott Derrickson")
    assert hits[0][0].title == "Scott Derrickson" and len(hits) <= 5
    assert "Derrickson" in hits[0][1]  # the snippet comes from the text
    assert [p.title for p, _ in index.search("Ed Wood", limit=2)][0].startswith("Ed Wood")


def test_queries_with_fts_syntax_do_not_break_the_index(index):
    for query in ['AND OR NOT', '"unbalanced', "title:x*", "(( ))", "NEAR(a b)", "Derrickson's films?"]:
        index.search(query)  # no sqlite error
    assert index.search("   ") == [] and index.search("zzqxjv") == []
    assert fts_query('a "b" OR c') == '"a" OR "b" OR "or" OR "c"'


def test_sections_and_reading(index):
    page = index.search("Scott Derrickson")[0][0]
    assert index.page(page.page_id) is page
    whole = " ".join(page.sections)
    assert all(sentence.strip() in whole for sentence in page.sentences)
    found, number, text = index.section(f"{page.page_id}#1")
    assert found is page and number == 1 and text == page.sections[0]
    with pytest.raises(vf.ToolCallError, match="search_pages"):
        index.page("no_such_page")
    with pytest.raises(vf.ToolCallError, match="sections 1 to"):
        index.section(f"{page.page_id}#99")
    with pytest.raises(vf.ToolCallError, match="not a section id"):
        index.section(page.page_id)


@pytest.mark.parametrize("prediction, reference, em, f1", [
    ("The Beatles", "Beatles", 1.0, 1.0),
    ("yes", "yes", 1.0, 1.0),
    ("no", "yes", 0.0, 0.0),
    ("American director", "American", 0.0, pytest.approx(2 / 3)),
    ("", "Paris", 0.0, 0.0),
])
def test_exact_match_and_f1(prediction, reference, em, f1):
    assert exact_match(prediction, reference) == em and token_f1(prediction, reference) == f1


@pytest.fixture
def env():
    return vf.load_environment("wiki-search", corpus_path=str(corpus_file()))


async def test_tools_end_to_end_and_f1_reward(env):
    row = env.get_eval_dataset()[0]
    script = [
        {"content": None, "tool_calls": [tool_call("search_pages", {"query": "Scott Derrickson"})]},
        {"content": None, "tool_calls": [tool_call("view_sections", {"page_id": "scott_derrickson"})]},
        {"content": None, "tool_calls": [tool_call("read_section", {"section_id": "scott_derrickson#1"})]},
        {"content": None, "tool_calls": [tool_call("read_section", {"section_id": "nowhere#1"})]},
        f"Both are American. <answer>{row['answer']}</answer>",
    ]
    state = (await env.run_group(ScriptedClient(script), "m", row, n=1))[0]
    tools = [m["content"] for m in state["completion"] if m["role"] == "tool"]
    assert tools[0].startswith("scott_derrickson | Scott Derrickson")
    assert "scott_derrickson#1" in tools[1] and "American director" in tools[2]
    assert tools[3].startswith("Error:") and "search_pages" in tools[3]
    assert state["metrics"] == {"answer_f1": 1.0, "answer_exact_match": 1.0} and state["reward"] == 1.0


@pytest.mark.parametrize("reply, f1", [("<answer>no</answer>", 0.0), ("yes", 0.0), ("<answer>yes</answer>", 1.0)])
async def test_reward_on_wrong_and_malformed_answers(env, reply, f1):
    state = (await env.run_group(ScriptedClient([reply]), "m", env.get_eval_dataset()[0], n=1))[0]
    assert state["reward"] == f1


async def test_judge_rubric_decides_when_a_judge_model_is_configured():
    verdicts = []

    def judge(request):
        prompt = request["messages"][-1]["content"]
        verdicts.append(prompt)
        return "yes" if "Response to grade:\nBoth American" in prompt else "no"

    with ScriptedOpenAIServer(judge) as server:
        env = vf.load_environment("wiki-search", corpus_path=str(corpus_file()), judge_model="judge-m",
                                  judge_base_url=server.url)
        row = env.get_eval_dataset()[0]
        right = (await env.run_group(ScriptedClient(["<answer>Both American</answer>"]), "m", row, n=1))[0]
        wrong = (await env.run_group(ScriptedClient(["<answer>No</answer>"]), "m", row, n=1))[0]
    assert right["metrics"]["judge_correct"] == 1.0 and right["reward"] == 1.0
    assert right["metrics"]["answer_exact_match"] == 0.0  # exact match would have said no
    assert wrong["metrics"]["judge_correct"] == 0.0 and len(verdicts) == 2
    assert row["question"] in verdicts[0]


def test_json_array_files_are_read_too(tmp_path):
    records = [json.loads(line) for line in corpus_file().read_text().splitlines()[:3]]
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(records))
    env = vf.load_environment("wiki-search", corpus_path=str(path))
    assert len(env.get_eval_dataset()) == 3


@pytest.mark.parametrize("content, message", [
    ('{"question": "q", "answer": "a"}\n', "is not a HotpotQA record"),
    ('{"question": "q", "answer": "a", "context": [["T", "not a list"]]}\n', "context"),
    ("question,answer\nq,a\n", "is not JSON"),
    ("", "has no records"),
])
def test_files_not_in_hotpotqa_format_get_a_clear_message(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(vf.EnvConfigError, match=message) as caught:
        vf.load_environment("wiki-search", corpus_path=str(path))
    assert "HotpotQA format" in str(caught.value) or "does not exist" in str(caught.value)


def test_missing_corpus_says_how_to_point_at_it(monkeypatch, tmp_path):
    monkeypatch.delenv("PRIME_DATA_DIR", raising=False)
    with pytest.raises(vf.EnvConfigError, match="corpus_path.*PRIME_DATA_DIR"):
        vf.load_environment("wiki-search")
    with pytest.raises(vf.EnvConfigError, match="does not exist"):
        vf.load_environment("wiki-search", corpus_path=str(tmp_path / "nope.jsonl"))
    monkeypatch.setenv("PRIME_DATA_DIR", str(data_root()))
    assert len(vf.load_environment("wiki-search").get_eval_dataset()) >= 50
