#!/usr/bin/env python
"""Benchmark: the LLM client's guards against hostile endpoints on 127.0.0.1.

    python scripts/bench_llm_guards.py

* deadline overrun: a server that sends its headers, then one byte a second; how long past
  ``timeout_s`` one attempt runs before it is abandoned.
* peak memory (RSS) of a fresh process whose call gets a 60 MB answer, with the default 2 MB
  cap and with the cap raised above the answer (what every call cost before the cap).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_CHILD = """
import asyncio, json, sys
from pydantic import BaseModel
from nl2sql_assets.config import ModelSettings
from nl2sql_assets.llm.client import LLMCallError, LLMClient, _lib
class Answer(BaseModel):
    total: int
    label: str
def peak_mib():  # this process's own peak RSS (ru_maxrss would count the parent's memory at fork)
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024
_lib()
before = peak_mib()
client = LLMClient(lambda node: ModelSettings(model="openai/hostile", api_base=sys.argv[1], api_key="k" * 12,
                                              timeout_s=60, max_retries=0, max_response_bytes=int(sys.argv[2])))
try:
    asyncio.run(client.structured("planner", [{"role": "user", "content": "q"}], Answer))
    error = None
except LLMCallError as exc:
    error = str(exc).splitlines()[0][:120]
print(json.dumps({"before": before, "peak": peak_mib(), "error": error}))
"""


def main() -> int:
    from pydantic import BaseModel

    from nl2sql_assets.config import ModelSettings
    from nl2sql_assets.llm.client import LLMCallError, LLMClient, _lib
    from tests.hostile_llm import HostileServer

    class Answer(BaseModel):
        total: int
        label: str

    _lib()
    print("deadline: a body trickled at one byte a second")
    for timeout in (1.0, 2.0, 3.0):
        with HostileServer("trickle") as server:
            client = LLMClient(lambda node, s=server, t=timeout: ModelSettings(
                model="openai/hostile", api_base=s.base_url, api_key="k" * 12, timeout_s=t, max_retries=0))
            started = time.monotonic()
            with contextlib.suppress(LLMCallError):
                asyncio.run(client.structured("planner", [{"role": "user", "content": "q"}], Answer))
            elapsed = time.monotonic() - started
        print(f"  timeout_s {timeout:.0f}: the call ended after {elapsed:.3f} s (overrun {1000 * (elapsed - timeout):.0f} ms)")

    print("peak RSS of a fresh process answered with 60 MB (MiB; 'before' = after importing litellm)")
    for chunked in (False, True):
        for cap in (2_000_000, 100_000_000):
            with HostileServer("huge", chunked=chunked) as server:
                done = subprocess.run([sys.executable, "-c", _CHILD, server.base_url, str(cap)], capture_output=True,
                                      text=True, timeout=600)
            out = json.loads(done.stdout.strip().splitlines()[-1])
            how = "chunked" if chunked else "content-length"
            print(f"  {how:<14} cap {cap / 1e6:>5.0f} MB: before {out['before']:.0f}, peak {out['peak']:.0f}; "
                  f"{out['error'] or 'no error'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
