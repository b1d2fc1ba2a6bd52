"""An environment written in the verifiers 0.1.x style runs after changing only its import line.

The source below is our own, written the way verifiers users write environments. The test swaps
`import verifiers as vf` for `import prime_cli.envs as vf` and changes nothing else.
"""

import textwrap
import types

from tests.support.scripted_client import ScriptedClient, tool_call

VERIFIERS_STYLE_SOURCE = textwrap.dedent('''
    import verifiers as vf

    def get_weather(city: str, unit: str = "celsius") -> str:
        """Current weather of a city.

        Args:
            city: The city name.
            unit: celsius or fahrenheit.
        """
        return f"sunny in {city}, 21 {unit}"

    class GuessEnv(vf.MultiTurnEnv):
        async def setup_state(self, state, **kwargs):
            state["guesses"] = 0
            return state

        async def env_response(self, messages, state, **kwargs):
            state["guesses"] += 1
            guess = self.parser.parse_answer(messages) or ""
            hint = "correct" if guess.strip() == state["answer"] else "try again"
            return [{"role": "user", "content": hint}]

        @vf.stop
        async def guessed(self, state) -> bool:
            return bool(state["completion"]) and state["completion"][-1].get("content") == "correct"

        @vf.stop
        async def out_of_guesses(self, state) -> bool:
            return state["guesses"] >= 3

    def load_environment(**kwargs):
        parser = vf.XMLParser(fields=["think", "answer"], answer_field="answer")

        def correct_answer(completion, answer, parser, **kwargs) -> float:
            return 1.0 if (parser.parse_answer(completion) or "").strip() == answer else 0.0

        async def few_turns(state) -> float:
            return 1.0 / max(1, state["turn"])

        def mentions_task(prompt, task, info) -> float:
            return float(info.get("level", 0) >= 0 and bool(prompt) and bool(task))

        qa = vf.SingleTurnEnv(
            dataset=[{"question": "2+3?", "answer": "5", "info": {"level": 1}}],
            system_prompt="Answer in <answer> tags.",
            parser=parser,
            rubric=vf.Rubric(funcs=[correct_answer, parser.get_format_reward_func()], weights=[1.0, 0.2], parser=parser),
        )
        guess_rubric = vf.Rubric(funcs=[correct_answer], parser=parser)
        guess_rubric.add_reward_func(few_turns, weight=0.5)
        guess_rubric.add_metric(mentions_task)
        guess = GuessEnv(dataset=[{"question": "Guess my number (1-3)", "answer": "2"}], parser=parser,
                         rubric=guess_rubric, max_turns=5)
        tools = vf.ToolEnv(
            dataset=[{"question": "Weather in Paris?", "answer": "sunny"}],
            tools=[get_weather],
            max_turns=4,
            rubric=vf.Rubric(funcs=[lambda completion, answer: float(answer in completion[-1]["content"])]),
        )
        return vf.EnvGroup(envs=[qa, guess, tools], env_names=["qa", "guess", "tools"])
''')


def ported_module():
    assert VERIFIERS_STYLE_SOURCE.count("import verifiers as vf") == 1
    source = VERIFIERS_STYLE_SOURCE.replace("import verifiers as vf", "import prime_cli.envs as vf")
    module = types.ModuleType("ported_env")
    exec(compile(source, "ported_env.py", "exec"), module.__dict__)
    return module


def scripted_model(messages, tools, sampling_args):
    last = messages[-1]["content"] or ""
    if tools and not any(m["role"] == "tool" for m in messages):
        return {"content": None, "tool_calls": [tool_call("get_weather", {"city": "Paris"}, "w1")]}
    if tools:
        return "It is sunny in Paris."
    if "2+3" in last:
        return "<think>easy</think><answer>5</answer>"
    return "<answer>1</answer>" if last.startswith("Guess") else "<answer>2</answer>"


async def test_verifiers_style_environment_runs_after_changing_the_import():
    env = ported_module().load_environment()
    rows = {row["task"]: row for row in env.get_dataset()}
    assert set(rows) == {"qa", "guess", "tools"}
    client = ScriptedClient(scripted_model)

    [qa] = await env.run_group(client, "m", rows["qa"], n=1)
    assert qa["metrics"]["correct_answer"] == 1.0 and qa["metrics"]["format_reward"] == 1.0
    assert qa["reward"] == 1.2

    [guess] = await env.run_group(client, "m", rows["guess"], n=1)
    assert guess["turn"] == 2 and guess["stop_condition"] == "guessed"
    assert guess["metrics"]["correct_answer"] == 1.0 and guess["metrics"]["few_turns"] == 0.5
    assert guess["metrics"]["mentions_task"] == 1.0 and guess["reward"] == 1.25

    [tools] = await env.run_group(client, "m", rows["tools"], n=1)
    assert tools["completion"][1] == {"role": "tool", "content": "sunny in Paris, 21 celsius", "tool_call_id": "w1"}
    assert tools["stop_condition"] == "no_tools_called" and tools["reward"] == 1.0
    # the union of metrics: every rollout reports every child's metric names
    assert set(tools["metrics"]) == set(qa["metrics"]) == set(guess["metrics"])
