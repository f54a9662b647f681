"""The engine contract the evaluator talks to, its built-in and HTTP implementations, and the server."""

from nl2sql_assets.engines.builtin import BuiltinEngine, reply_from_result
from nl2sql_assets.engines.contract import AskRequest, EngineReply, NL2SQLEngine, TokenUsage, Turn
from nl2sql_assets.engines.http_client import HttpEngine, HttpEngineConfig
from nl2sql_assets.engines.server import EngineServer

__all__ = ["AskRequest", "BuiltinEngine", "EngineReply", "EngineServer", "HttpEngine", "HttpEngineConfig",
           "NL2SQLEngine", "TokenUsage", "Turn", "reply_from_result"]
