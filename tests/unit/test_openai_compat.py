"""The lean OpenAI-compatible wire: the body it sends, and a connection pool that never outlives its loop."""

from __future__ import annotations

import asyncio
import json

from nl2sql_assets.engine import nodes
from nl2sql_assets.engine.events import EventBus
from nl2sql_assets.engine.plan import PlanModel
from nl2sql_assets.evaluation.running.gold_llm import GoldLLMServer
from nl2sql_assets.llm import client, openai_compat


def test_a_field_encoded_once_reads_back_as_the_same_json_object() -> None:
    response_format = client.response_format_for(PlanModel)
    fields = {"model": "gold", "messages": [{"role": "user", "content": 'a "quoted" question'}],
              "response_format": openai_compat.EncodedJSON(json.dumps(response_format)), "temperature": 0}
    body = json.loads(openai_compat.encode_body(fields))
    assert body == {"model": "gold", "messages": fields["messages"], "response_format": response_format,
                    "temperature": 0}


def test_a_body_of_encoded_fields_only_is_still_one_object() -> None:
    assert json.loads(openai_compat.encode_body({"a": openai_compat.EncodedJSON("[1, 2]")})) == {"a": [1, 2]}


def test_the_loops_session_is_closed_and_forgotten_when_asyncio_run_ends() -> None:
    """Nothing calls close_client here: the loop's shutdown closes the session all the same."""
    with GoldLLMServer([], EventBus()) as server:
        settings = server.llm_config().default
        assert settings is not None
        llm = client.LLMClient(lambda node: settings)
        assert client.uses_openai_compatible(settings)

        loops: list[asyncio.AbstractEventLoop] = []

        async def one_call() -> object:
            try:  # the gold server knows no run "r": a 400, which is fine here
                await llm.structured("resolver", [{"role": "user", "content": "hi"}], nodes.DatasourceSelection,
                                     run_id="r")
            except client.LLMCallError as exc:
                assert "HTTP 400" in str(exc)
            loops.append(asyncio.get_running_loop())
            return openai_compat._sessions[loops[-1]].session

        sessions = [asyncio.run(one_call()) for _ in range(2)]
        assert sessions[0] is not sessions[1]
        assert all(s.closed for s in sessions)  # type: ignore[attr-defined]
        # Other loops (the engine's long-lived background loop) keep theirs; these two are gone.
        assert not any(loop in openai_compat._sessions for loop in loops)
