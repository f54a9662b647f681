"""The gold LLM: a local OpenAI-compatible server that answers every node from a case's gold data.

Mode plans (and tests) run the real pipeline — litellm over HTTP included — with a "model"
that always returns the reviewed answer, so a failing case is a bug in a code node or a
plan, never a model's mistake. Which case a request belongs to is learnt from the engine's
``run.started`` event (its ``context.case_id``) and the ``X-NL2SQL-Run-Id`` header each call
carries; what to answer is one table keyed by the structured output's schema name.

A follow-up case's earlier turns are served too: the runner names the turn in the run's
context (``turn``: 0 for the first earlier turn, ``len(turns)`` for the case's own question),
and each turn is answered from its own question and plan. A planner asked for candidate k of
N gets the case's k-th ``candidate_plans`` entry (its hand plan when there is none), so
candidate selection is measured key-free.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import json
import os
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from nl2sql_assets.config import ApiKind, CuratedAnswer, LLMConfig, ModelSettings
from nl2sql_assets.engine.events import RUN_FINISHED, RUN_STARTED, Event, EventBus
from nl2sql_assets.engine.nodes import CANDIDATE_NOTE, CURATED_CANDIDATES, curated_question_of
from nl2sql_assets.evaluation.suites import EvalCase
from nl2sql_assets.llm.client import RUN_ID_HEADER, declare_free_model

GOLD_MODEL = "openai/gold-plans"
#: How runs reach this server: ``auto`` is the lean OpenAI-compatible client (real HTTP, no
#: litellm); ``litellm`` sends every call through litellm (a test keeps that path covered end to
#: end). An environment variable, so worker processes (shards) take the same wire.
GOLD_API_ENV = "NL2SQL_GOLD_API"
DEFAULT_USAGE = {"prompt_tokens": 120, "completion_tokens": 30}
FIXED_ANSWER = "Here are the results for your question."


class GoldRequestError(Exception):
    """A request the gold server cannot answer: unknown run, unknown schema, a case without a plan."""


@dataclass(frozen=True)
class _Run:
    case: EvalCase  # the case as this run sees it: an earlier turn's question and plan for a warm-up turn
    role: str | None


_CANDIDATE = re.compile(re.escape(CANDIDATE_NOTE).replace(r"\{index\}", r"(\d+)").replace(r"\{count\}", r"(\d+)"))


def turn_view(case: EvalCase, turn: int | None) -> EvalCase:
    """The case as one turn of its conversation sees it: an earlier turn's question, SQL and plan
    (no rows: the gold rows are the final turn's), or the case itself for its own question."""
    if turn is None or turn >= len(case.turns) or turn < 0:
        return case
    earlier = case.turns[turn]
    return case.model_copy(update={"question": earlier.question, "sql": earlier.sql, "plan": earlier.plan,
                                   "rows": None, "turns": [], "candidate_plans": [], "candidates": None})


def candidate_index(body: dict[str, Any]) -> int | None:
    """Which candidate plan (1-based) a planner request asks for, from its prompt; None: a single plan."""
    for message in reversed(body.get("messages") or []):
        content = message.get("content") if isinstance(message, dict) else None
        match = _CANDIDATE.search(content) if isinstance(content, str) else None
        if match:
            return int(match.group(1))
    return None


#: An answer maker: (case, role, server) → the JSON object the node expects.
AnswerFn = Callable[[EvalCase, "str | None", "GoldLLMServer"], dict[str, Any]]


def _unanswerable(case: EvalCase, role: str | None) -> bool:
    """The resolver should refuse: the case's outcome for this role says so, or it has no sql."""
    if role is not None and case.outcome.get(role) == "unanswerable":
        return True
    return case.sql is None


def _fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def rows_sentence(case: EvalCase) -> str:
    """An answer written only from the gold rows: the row count and the first row's values."""
    rows = case.rows or []
    if not rows:
        return "No rows match the question."
    first = ", ".join(f"{k} {_fmt(v)}" for k, v in rows[0].items())
    if len(rows) == 1:
        return f"The result is: {first}."
    return f"There are {len(rows)} rows; the first is: {first}."


# ---------------------------------------------------------------- the answer table


CLARIFICATION = "The question can be read more than one way: which one do you mean?"


def _datasources(case: EvalCase, role: str | None, server: GoldLLMServer) -> dict[str, Any]:
    if role is not None and case.outcome.get(role) == "clarify":
        return {
            "datasources": list(case.datasources),
            "answerable": True,
            "reason": "The question can be read more than one way.",
            "needs_clarification": True,
            "clarification": CLARIFICATION,
        }
    if _unanswerable(case, role):
        return {
            "datasources": [],
            "answerable": False,
            "reason": "No datasource holds what the question asks.",
        }
    return {
        "datasources": list(case.datasources),
        "answerable": True,
        "reason": "The gold case's datasource.",
    }


def _plan(case: EvalCase) -> Any:
    if case.plan is None:
        raise GoldRequestError(f"case {case.id!r} has no gold plan")
    return case.plan


def _decomposition(case: EvalCase, role: str | None, server: GoldLLMServer) -> dict[str, Any]:
    return {"sub_queries": [{"question": case.question, "expected_columns": _plan(case).output_names()}]}


def _plan_model(case: EvalCase, role: str | None, server: GoldLLMServer) -> dict[str, Any]:
    return _plan(case).to_data()


def serve_candidate(case: EvalCase, index: int | None) -> EvalCase:
    """The case with the plan candidate ``index`` (1-based) should get as its plan."""
    if index is None or index < 1 or index > len(case.candidate_plans):
        return case
    return case.model_copy(update={"plan": case.candidate_plans[index - 1]})


def _repair(case: EvalCase, role: str | None, server: GoldLLMServer) -> dict[str, Any]:
    return {"keep_same_plan": True, "plan": None, "reason": "Keep the same plan."}


def _sql_key(sql: str | None) -> str:
    return " ".join((sql or "").split()).rstrip(";").lower()


def _curated_match(case: EvalCase, role: str | None, server: GoldLLMServer) -> dict[str, Any]:
    """The listed verified question whose SQL is the case's gold SQL (or one of its
    alternatives): the paraphrase a perfect curated node would find; else no match."""
    gold = {_sql_key(sql) for sql in [case.sql, *case.alt_sql] if sql}
    messages = server.request_messages()
    user = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")
    for number in range(1, CURATED_CANDIDATES + 1):
        question = curated_question_of(user, number)
        if question is None:
            break
        verified = server.curated.get(question)
        if verified is not None and _sql_key(verified.sql) in gold:
            return {"match": number, "reason": "The verified question's SQL is the case's gold SQL."}
    return {"match": None, "reason": "No verified question asks the same thing."}


def _answer(case: EvalCase, role: str | None, server: GoldLLMServer) -> dict[str, Any]:
    if server.synthesizer == "rows":
        text = rows_sentence(case)
        return {"summary": text, "content": text}
    return {"summary": FIXED_ANSWER, "content": FIXED_ANSWER}


#: Structured output schema name → the gold answer. A new node output is one more entry.
ANSWERS: dict[str, AnswerFn] = {
    "DatasourceSelection": _datasources,
    "Decomposition": _decomposition,
    "PlanModel": _plan_model,
    "PlanRepair": _repair,
    "SynthesizedAnswer": _answer,
    "CuratedMatch": _curated_match,
}


# ---------------------------------------------------------------- HTTP


_JSON_HEADERS = {"Content-Type": "application/json"}
#: Threads for a subclass's ``respond`` (which may sleep: a model's latency, a hung provider), so
#: that many requests can be held at once, as real providers hold them.
_BLOCKING_WORKERS = 64


def _json_response(status: int, body: dict[str, Any]) -> Any:
    from aiohttp import web

    return web.Response(status=status, body=json.dumps(body).encode("utf-8"), headers=_JSON_HEADERS)


def _close(server: Any, listener: asyncio.Server) -> None:
    """Stop accepting, and cut every keep-alive connection, answered or not (a client held by a
    stalled subclass gets a dropped connection, as when a provider goes away)."""
    listener.close()
    for handler in server.connections:
        handler.force_close()
        transport = handler.transport
        if transport is not None:
            transport.abort()


def _route(path: str) -> str:
    return path.split("?", 1)[0].rstrip("/")


def _gold_api() -> ApiKind:
    value = os.environ.get(GOLD_API_ENV, "auto")
    if value not in ("auto", "litellm", "openai-compatible"):
        raise ValueError(f"{GOLD_API_ENV}={value!r}: expected auto, litellm or openai-compatible")
    return value  # type: ignore[return-value]


class GoldLLMServer:
    """An OpenAI-compatible chat-completions server on 127.0.0.1 that serves gold answers.

    ``usage`` sets the token counts every response reports (``prompt_tokens``,
    ``completion_tokens``, ``cached_tokens``, ``reasoning_tokens``,
    ``cache_creation_input_tokens``); ``synthesizer="rows"`` writes each answer from the
    case's gold rows instead of a fixed sentence; ``answers`` replaces or adds entries of
    the answer table (tests use it to serve a repair or a wrong plan); ``curated`` are the
    project's verified answers, so the curated node's call finds a paraphrase of one.
    """

    def __init__(
        self,
        cases: Iterable[EvalCase],
        bus: EventBus,
        *,
        usage: dict[str, int] | None = None,
        synthesizer: Literal["fixed", "rows"] = "fixed",
        answers: Mapping[str, AnswerFn] | None = None,
        curated: Iterable[CuratedAnswer] = (),
    ) -> None:
        self.answers: dict[str, AnswerFn] = {**ANSWERS, **(answers or {})}
        self.curated: dict[str, CuratedAnswer] = {c.question: c for c in curated}
        self._request = threading.local()  # the request being answered, per thread (a subclass answers on threads)
        self.cases: dict[str, EvalCase] = {c.id: c for c in cases}
        self._by_question: dict[str, EvalCase] = {}
        for c in self.cases.values():
            self._by_question.setdefault(c.question.strip().lower(), c)
        self.bus = bus
        self.usage = dict(DEFAULT_USAGE if usage is None else usage)
        self.synthesizer = synthesizer
        self._runs: dict[str, _Run] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.requests = 0
        self.requests_by_schema: Counter[str] = Counter()
        self.log: list[tuple[str | None, str]] = []  # (run id, schema name) of each answered request
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._blocking: concurrent.futures.ThreadPoolExecutor | None = None
        self._listening: tuple[Any, asyncio.Server] | None = None  # the server's thread's (handlers, listener)
        self._on_loop = False
        self._unsubscribe: list[Callable[[], None]] = []

    # ------------------------------------------------------------ lifecycle

    def start(self) -> GoldLLMServer:
        """Listen on a free port of 127.0.0.1 and serve from one event loop on a thread of its own
        (aiohttp's server: no thread per connection, C-parsed requests)."""
        if self._sock is not None:
            return self
        declare_free_model(GOLD_MODEL)  # litellm then prices its calls by a lookup, not a rule search
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", 0))
            sock.listen(128)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._unsubscribe = [
            self.bus.subscribe(RUN_STARTED, self._on_started),
            self.bus.subscribe(RUN_FINISHED, self._on_finished),
        ]
        self._sock = sock
        ready = concurrent.futures.Future[None]()
        self._thread = threading.Thread(target=self._serve, args=(sock, ready), name="gold-llm-server", daemon=True)
        self._thread.start()
        try:
            ready.result(timeout=10)
        except BaseException:
            self.stop()
            raise
        return self

    def _serve(self, sock: socket.socket, ready: concurrent.futures.Future[None]) -> None:
        """The server thread: one event loop, run until ``stop``."""
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._listening = loop.run_until_complete(self._listen(sock.dup()))
        except BaseException as exc:
            ready.set_exception(exc)
            loop.close()
            return
        ready.set_result(None)
        try:
            loop.run_forever()
        finally:
            if self._listening is not None:
                _close(*self._listening)
                self._listening = None
            loop.run_until_complete(asyncio.sleep(0))  # let the transports' close callbacks run
            for task in asyncio.all_tasks(loop):
                task.cancel()
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.gather(*asyncio.all_tasks(loop), return_exceptions=True))
            loop.close()

    async def _listen(self, sock: socket.socket) -> tuple[Any, asyncio.Server]:
        """Serve ``sock`` (a duplicate of the listening socket, closed with the listener) here."""
        from aiohttp.web_server import Server

        server = Server(self._handle, access_log=None)
        listener = await asyncio.get_running_loop().create_server(server, sock=sock)
        return server, listener

    async def _pause(self) -> None:
        """On the server's thread: accept no new connection there (those open stay served)."""
        if self._listening is not None:
            self._listening[1].close()

    async def _resume(self) -> None:
        """On the server's thread: accept connections there again."""
        if self._listening is not None and self._sock is not None:
            server = self._listening[0]
            self._listening = (server, await asyncio.get_running_loop().create_server(server, sock=self._sock.dup()))

    @contextlib.asynccontextmanager
    async def on_running_loop(self) -> AsyncIterator[None]:
        """Accept and answer connections on the calling event loop for the duration of the block
        (a run's own loop: its requests and answers then stay on one thread), and on the
        server's thread again after it; the block's connections are closed when it ends. Only
        for a loop that never blocks on this server (an async client): a blocking call from the
        loop itself would wait on its own answer."""
        thread_loop = self._loop
        if self._sock is None or thread_loop is None or self._on_loop:
            yield
            return
        self._on_loop = True
        try:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._pause(), thread_loop))
            here = await self._listen(self._sock.dup())
            try:
                yield
            finally:
                _close(*here)
                await asyncio.sleep(0)
                if self._loop is thread_loop and not thread_loop.is_closed():
                    with contextlib.suppress(RuntimeError):  # the server stopped meanwhile
                        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._resume(), thread_loop))
        finally:
            self._on_loop = False

    async def _handle(self, request: Any) -> Any:
        """One HTTP request: ``GET .../models``, ``POST .../chat/completions``, else a 404."""
        route = _route(request.path)
        if request.method == "GET" and route.endswith("/models"):
            return _json_response(200, {"object": "list", "data": [{"id": "gold-plans", "object": "model"}]})
        if request.method != "POST" or not route.endswith("/chat/completions"):
            return _json_response(404, {"error": {"message": f"no route {request.path_qs}", "type": "not_found"}})
        raw = await request.read()
        run_id = request.headers.get(RUN_ID_HEADER)
        if self._inline:
            status, reply = self.respond(raw, run_id)
        else:  # a subclass's respond may block: on a thread, so requests overlap as before
            with self._lock:
                if self._blocking is None:
                    self._blocking = concurrent.futures.ThreadPoolExecutor(_BLOCKING_WORKERS, "gold-llm-respond")
                blocking = self._blocking
            status, reply = await asyncio.get_running_loop().run_in_executor(blocking, self.respond, raw, run_id)
        return _json_response(status, reply)

    @property
    def _inline(self) -> bool:
        """The gold answers take well under a millisecond: answered on the server's loop. A
        subclass that replaces ``respond`` or ``answer`` (to sleep, hang or misbehave) is answered
        on a thread."""
        cls = type(self)
        return cls.respond is GoldLLMServer.respond and cls.answer is GoldLLMServer.answer

    def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        loop, thread = self._loop, self._thread
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # already closing
                loop.call_soon_threadsafe(loop.stop)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        with self._lock:
            blocking, self._blocking = self._blocking, None
        if blocking is not None:
            blocking.shutdown(wait=False, cancel_futures=True)
        if self._sock is not None:
            self._sock.close()
        self._sock = None
        self._loop = None
        self._thread = None

    def __enter__(self) -> GoldLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._sock is None:
            raise RuntimeError("the gold LLM server is not started")
        return int(self._sock.getsockname()[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def llm_config(self) -> LLMConfig:
        """An llm section that sends every node to this server (no key needed, no retries), over
        the wire ``$NL2SQL_GOLD_API`` names (``auto`` when unset)."""
        return LLMConfig(
            default=ModelSettings(
                model=GOLD_MODEL,
                api=_gold_api(),
                api_base=self.base_url,
                api_key="gold",
                temperature=0,
                timeout_s=10,
                max_retries=0,
            )
        )

    # ------------------------------------------------------------ runs

    def _on_started(self, event: Event) -> None:
        if event.run_id is None:
            return
        payload = event.payload or {}
        context = payload.get("context") or {}
        case = self.cases.get(str(context.get("case_id"))) if context.get("case_id") is not None else None
        if case is None:
            # Without a case id, a question that is exactly a case's question still finds it.
            case = self._by_question.get(str(payload.get("question", "")).strip().lower())
        if case is None:
            return
        turn = context.get("turn")
        view = turn_view(case, int(turn) if isinstance(turn, int) else None)
        with self._lock:
            self._runs[event.run_id] = _Run(view, payload.get("role"))

    def _on_finished(self, event: Event) -> None:
        if event.run_id is not None:
            with self._lock:
                self._runs.pop(event.run_id, None)

    def respond(self, raw: bytes, run_id: str | None) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) for one chat-completions request; a subclass may misbehave here."""
        try:
            return 200, self.answer(json.loads(raw or b"{}"), run_id)
        except (GoldRequestError, ValueError) as exc:
            return 400, {"error": {"message": f"gold LLM: {exc}", "type": "invalid_request_error", "code": None}}
        except Exception as exc:  # a bug in an answer maker: say so instead of dropping the connection
            return 500, {"error": {"message": f"gold LLM failed: {exc!r}", "type": "server_error", "code": None}}

    def answer(self, body: dict[str, Any], run_id: str | None) -> dict[str, Any]:
        """The chat.completion for one request (raises GoldRequestError for a 400)."""
        response_format = body.get("response_format") or {}
        schema = (
            (response_format.get("json_schema") or {}).get("name")
            if isinstance(response_format, dict)
            else None
        )
        if not schema:
            raise GoldRequestError("the request has no response_format.json_schema.name")
        make = self.answers.get(schema)
        if make is None:
            raise GoldRequestError(f"unknown structured output {schema!r}; known: {sorted(self.answers)}")
        if not run_id:
            raise GoldRequestError(f"the request has no {RUN_ID_HEADER} header")
        with self._lock:
            run = self._runs.get(run_id)
        if run is None:
            raise GoldRequestError(f"unknown run {run_id!r}: no run.started event named a known case for it")
        self._request.messages = body.get("messages") or []
        case = serve_candidate(run.case, candidate_index(body)) if schema == "PlanModel" else run.case
        content = json.dumps(make(case, run.role, self))
        with self._lock:
            self.requests += 1
            self.requests_by_schema[schema] += 1
            self.log.append((run_id, schema))
            n = next(self._ids)
        return {
            "id": f"chatcmpl-gold-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model") or "gold-plans"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": self._usage_block(),
        }

    def request_messages(self) -> list[dict[str, Any]]:
        """The messages of the request being answered on this thread (for answer makers)."""
        return list(getattr(self._request, "messages", []))

    def _usage_block(self) -> dict[str, Any]:
        u = self.usage
        prompt = int(u.get("prompt_tokens", DEFAULT_USAGE["prompt_tokens"]))
        completion = int(u.get("completion_tokens", DEFAULT_USAGE["completion_tokens"]))
        block: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": int(u.get("cached_tokens", 0))},
            "completion_tokens_details": {"reasoning_tokens": int(u.get("reasoning_tokens", 0))},
        }
        if "cache_creation_input_tokens" in u:
            block["cache_creation_input_tokens"] = int(u["cache_creation_input_tokens"])
        return block


__all__ = ["ANSWERS", "FIXED_ANSWER", "GOLD_MODEL", "GoldLLMServer", "GoldRequestError", "rows_sentence"]
