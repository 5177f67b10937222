"""The SDK agents the tests serve and trace: offline, on the SDK's own `ScriptedModel`.

A triage agent calls `get_weather`, then hands off to a writer, who answers. Every model response reports
usage, so the tests can check what reaches the budgets: 10+5, 20+3, 30+7 tokens, 75 in all, 3 requests.
"""

from agents import Agent, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.usage import Usage

ANSWER = "It is sunny in Paris."
TOTAL_TOKENS = 75


def usage(input_tokens: int, output_tokens: int) -> Usage:
    return Usage(requests=1, input_tokens=input_tokens, output_tokens=output_tokens,
                 total_tokens=input_tokens + output_tokens)


def weather_team(calls: list, *, emit_traces: bool = False) -> Agent:
    """A fresh triage → writer pair (a ScriptedModel is used up by one run); `calls` gets each city
    `get_weather` is asked about."""

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return f"sunny in {city}"

    writer = Agent(name="Writer", instructions="Write the answer.", model=ScriptedModel(
        [{"output": [assistant_message(ANSWER)], "usage": usage(30, 7)}], emit_traces=emit_traces))
    return Agent(name="Triage", instructions="Find the weather, then hand off.", tools=[get_weather],
                 handoffs=[writer], model=ScriptedModel([
                     {"output": [function_call("get_weather", {"city": "Paris"}, call_id="call_1")],
                      "usage": usage(10, 5)},
                     {"output": [function_call("transfer_to_writer", {}, call_id="call_2")], "usage": usage(20, 3)},
                 ], emit_traces=emit_traces))


def looping_agent(turns: int) -> Agent:
    """An agent whose model asks for a tool on every turn, `turns` times: it never gives a final output."""

    @function_tool
    def look_again() -> str:
        """Look once more."""
        return "nothing yet"

    return Agent(name="Looper", tools=[look_again], model=ScriptedModel(
        [{"output": [function_call("look_again", {}, call_id=f"call_{i}")], "usage": usage(1, 1)}
         for i in range(turns)]))
