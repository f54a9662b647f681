"""An in-process event bus: each question runs in a scope that publishes run.started and run.finished."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

RUN_STARTED = "run.started"
RUN_FINISHED = "run.finished"
EVAL_CASE = "eval.case"
EVAL_FINISHED = "eval.finished"


@dataclass(frozen=True)
class Event:
    topic: str
    run_id: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)


Handler = Callable[[Event], None]


class EventBus:
    """Publish/subscribe by topic (``"*"`` hears everything). Handlers run synchronously;
    one that raises is reported on stderr and never breaks the publisher."""

    def __init__(self) -> None:
        self._handlers: dict[str, list[Handler]] = {}
        self._lock = threading.Lock()

    def subscribe(self, topic: str, handler: Handler) -> Callable[[], None]:
        with self._lock:
            self._handlers.setdefault(topic, []).append(handler)

        def unsubscribe() -> None:
            with self._lock:
                if handler in self._handlers.get(topic, []):
                    self._handlers[topic].remove(handler)

        return unsubscribe

    def publish(self, event: Event) -> None:
        with self._lock:
            handlers = list(self._handlers.get(event.topic, ())) + list(self._handlers.get("*", ()))
        for handler in handlers:
            try:
                handler(event)
            except Exception as exc:  # a listener must not break a question
                import sys

                print(f"event handler for {event.topic} failed: {exc!r}", file=sys.stderr)
