"""An SDK server that uses the protocol beyond tools: instructions, a resource, a resource
template, a prompt, a tool that elicits, one marked destructive, and one that adds a prompt
and a resource. In-process in tests; ``python features.py`` serves it on stdio."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts import Prompt
from mcp.server.mcpserver.resources import TextResource
from pydantic import BaseModel, Field


class Booking(BaseModel):
    name: str = Field(description="Who is booking")
    seats: int = Field(description="How many seats")
    window: bool = Field(default=False, description="A window seat?")


QUESTION = "Who is travelling?"


def build() -> MCPServer:
    server = MCPServer("travel", instructions="Always confirm the date before booking.")

    @server.resource("travel://policy", name="policy", mime_type="text/plain")
    def policy() -> str:
        """The travel policy."""
        return "Economy class for trips under 6 hours."

    @server.resource("travel://trips/{trip_id}", name="trip", mime_type="application/json")
    def trip(trip_id: str) -> str:
        """One trip by its id."""
        return f'{{"id": "{trip_id}", "to": "Lisbon"}}'

    @server.prompt()
    def plan(city: str, days: str = "3") -> str:
        """Plan a trip."""
        return f"Plan a {days}-day trip to {city}."

    @server.tool()
    def fares(city: str) -> str:
        """Cheapest fares to a city."""
        return f"{city}: 120 EUR"

    @server.tool(annotations=types.ToolAnnotations(destructive_hint=True))
    def cancel(trip_id: str) -> str:
        """Cancel a trip (it cannot be undone)."""
        return f"trip {trip_id} cancelled"

    @server.tool()
    async def extend(ctx: Context) -> str:
        """Add the prompt 'pack' and the resource travel://visa, and say so."""

        def pack(city: str) -> str:
            """What to pack."""
            return f"Pack for {city}."

        server.add_prompt(Prompt.from_function(pack))
        server.add_resource(TextResource(uri="travel://visa", name="visa", text="No visa."))
        await ctx.notify_prompts_changed()  # 2026-07-28: subscriptions/listen
        await ctx.notify_resources_changed()
        await ctx.session.send_prompt_list_changed()  # 2025-11-25: notifications
        await ctx.session.send_resource_list_changed()
        return "extended"

    @server.tool()
    async def book(ctx: Context) -> Any:
        """Book a seat, asking the user for the details."""
        if (ctx.protocol_version or "") >= "2026":  # asks by an input_required round trip
            got = (ctx.input_responses or {}).get("who")
            if got is None:
                schema = Booking.model_json_schema()
                ask = types.ElicitRequestFormParams(message=QUESTION, requested_schema=schema)
                return types.InputRequiredResult(
                    input_requests={"who": types.ElicitRequest(params=ask)}
                )
            assert isinstance(got, types.ElicitResult)
            if got.action != "accept" or got.content is None:
                return f"booking {got.action}d"
            data = Booking.model_validate(got.content)
        else:
            answer = await ctx.elicit(QUESTION, Booking)
            if answer.action != "accept" or answer.data is None:
                return f"booking {answer.action}d"
            data = answer.data
        return f"booked {data.seats} seat(s) for {data.name}, window={data.window}"

    return server


if __name__ == "__main__":
    build().run()
