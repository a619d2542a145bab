"""Regenerate ``book/data/robot_text.txt``, the training text of the tiny model.

Run ``python -m book.make_text``. The text is a seeded, generated grammar of
short robot-arm episodes, so the course ships its own data and needs no
download. An episode names an object, then refers back to it, which gives
attention something to learn: the second sentence must copy the colour and
object of the first, however far back they are.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SEED = 7
HELD_OUT_SEED = 8  # another seed for the same grammar: the held-out episodes of chapters 1 and 2
EPISODES = 3_000
AGENTS = ["arm", "gripper", "robot"]
GRASP = ["lifts", "grips", "picks"]
RELEASE = ["drops", "places", "moves"]
COLOURS = ["red", "blue", "green", "yellow"]
OBJECTS = ["block", "cup", "box", "ball"]
PLACES = ["table", "shelf", "tray"]


def episode(rng):
    agent, colour, thing = rng.choice(AGENTS), rng.choice(COLOURS), rng.choice(OBJECTS)
    first = f"the {agent} {rng.choice(GRASP)} the {colour} {thing} ."
    verb = rng.choice(RELEASE)
    if verb == "drops":
        second = f"then it drops the {colour} {thing} ."
    else:
        second = f"then it {verb} the {colour} {thing} on the {rng.choice(PLACES)} ."
    return f"{first} {second}"


def episodes(n=EPISODES, seed=SEED):
    """n episodes drawn from the grammar with the given seed (the training text's by default)."""
    rng = np.random.default_rng(seed)
    return [episode(rng) for _ in range(n)]


def held_out_episodes(training_text, n=EPISODES, seed=HELD_OUT_SEED):
    """Of n episodes drawn with another seed, those whose exact text is not a line of the training text.

    Introduced in chapter 1 (held-out loss beside training loss); chapter 2 scores on them too.
    """
    seen = set(training_text.splitlines())
    return [e for e in episodes(n, seed) if e not in seen]


def main():
    text = "\n".join(episodes(EPISODES, SEED)) + "\n"
    path = Path(__file__).with_name("data") / "robot_text.txt"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    print(f"wrote {path.name}: {len(text):,} characters, {len(text.split()):,} words")


if __name__ == "__main__":
    main()
