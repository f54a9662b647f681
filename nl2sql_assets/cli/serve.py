"""``serve``: the built-in engine behind the HTTP engine contract."""

from __future__ import annotations

import argparse
import contextlib
from typing import Any

from nl2sql_assets.cli.common import EXIT_OK, add_command, project_config_path


def add(sub: Any) -> None:
    serve = add_command(sub, "serve", cmd_serve, help="serve the built-in engine over the HTTP engine contract (POST /ask)",
                           description="The reference server of docs/engine-api.openapi.yaml: the project's "
                                       "built-in engine behind POST /ask, for testing an HTTP client. Runs until "
                                       "Ctrl-C, SIGTERM or SIGHUP; writes nothing.")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    serve.add_argument("--port", type=int, default=8765, help="the port to listen on (0: any free port)")
    serve.add_argument("--gold", default=None, metavar="SUITE",
                       help="answer on the gold LLM of this suite's cases (no key, nothing spent): to test a "
                            "client or the evaluation of an HTTP engine end to end")


def cmd_serve(args: argparse.Namespace) -> int:
    config_path = project_config_path(args)
    from nl2sql_assets.engines import BuiltinEngine, EngineServer
    from nl2sql_assets.project import Project
    from nl2sql_assets.signals import defaults

    defaults()  # a server stops on SIGTERM and SIGHUP whatever its parent ignored
    with Project.load(config_path) as project, contextlib.ExitStack() as stack:
        engine = project.engine
        if args.gold:
            from nl2sql_assets.evaluation.running.gold_llm import GoldLLMServer
            from nl2sql_assets.evaluation.suites import load_suite

            suite = load_suite(project.config.resolve(args.gold))
            gold = stack.enter_context(GoldLLMServer(suite.cases, engine.bus, synthesizer="rows",
                                                     curated=project.config.curated))
            engine = engine.derive(llm=gold.llm_config(), plan_cache=False)
        server = EngineServer(BuiltinEngine(engine), args.host, args.port)
        print(f"serving the built-in engine at {server.url}/ask (Ctrl-C stops)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    return EXIT_OK
