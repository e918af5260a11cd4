"""Logging: logger `compiled_bw`; COMPILED_BW_LOG=graph,recompiles,fallbacks turns on topics.

Consumes the environment variable once at import; produces `emit(topic, msg, *args)`, which
logs at INFO when the topic is on (with a stderr handler if the user configured none), else
at DEBUG.
"""
import logging
import os

log = logging.getLogger("compiled_bw")
TOPICS = {"graph", "recompiles", "fallbacks"}
enabled: set = set()


def set_topics(spec: str) -> None:
    enabled.clear()
    for t in filter(None, (s.strip() for s in spec.split(","))):
        if t == "all":
            enabled.update(TOPICS)
        elif t in TOPICS:
            enabled.add(t)
        else:
            raise ValueError(f"COMPILED_BW_LOG: unknown topic {t!r}; known: {sorted(TOPICS)} or 'all'")
    if enabled and not log.handlers:
        h = logging.StreamHandler()
        h.setFormatter(logging.Formatter("[compiled_bw %(levelname)s] %(message)s"))
        log.addHandler(h)
        log.setLevel(logging.INFO)


def wants(topic: str) -> bool:
    """Whether emit(topic, ...) logs anything: build a costly message only then."""
    return topic in enabled or log.isEnabledFor(logging.DEBUG)


def emit(topic: str, msg: str, *args) -> None:
    if topic in enabled:
        log.info(msg, *args)
    elif log.isEnabledFor(logging.DEBUG):
        log.debug(msg, *args)


set_topics(os.environ.get("COMPILED_BW_LOG", ""))
