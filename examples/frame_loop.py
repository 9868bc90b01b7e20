"""A game loop that never blocks: poll the turn with ``next(timeout=0)`` each frame.

    python examples/frame_loop.py

A GUI or game main loop draws a frame every 1/60 s; the turn gets what is ready now
and the frame goes on (``PENDING`` means nothing more yet). The model: NAVI_BASE_URL
and NAVI_MODEL name a real endpoint; unset, the example runs offline on ``Scripted``.
"""

from __future__ import annotations

import os
import time

from navi_core import PENDING, Agent, OpenAIChat, Provider, Scripted, TextDelta


def provider(*answers: str) -> Provider:
    """NAVI_BASE_URL's endpoint, or ``answers`` replayed offline."""
    base_url = os.environ.get("NAVI_BASE_URL")
    if base_url:
        return OpenAIChat(os.environ.get("NAVI_MODEL", "qwen2.5"), base_url=base_url)
    return Scripted(answers)


FRAME = 1 / 60
agent = Agent(provider("Once upon a time, a fox learned to stream."))
stream = agent.run("Tell me a one-line story.")
frames = events = 0
running = True
while running:  # the host's own loop (pygame, Tk's after(), a game engine's tick)
    start = time.monotonic()
    while True:  # drain what is ready, without waiting
        ev = stream.next(timeout=0)
        if ev is PENDING:
            break  # nothing more this frame
        if ev is None:
            running = False  # the turn is over
            break
        events += 1
        if isinstance(ev, TextDelta):
            print(ev.text, end="", flush=True)  # "draw" it
    frames += 1
    # ... draw the frame here; a Stop button would call stream.cancel() ...
    time.sleep(max(0.0, FRAME - (time.monotonic() - start)))
stream.close()
print(f"\n{events} events over {frames} frames; no frame waited on the model")
agent.close()
