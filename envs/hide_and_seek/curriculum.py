"""Hide-and-seek's start-state curriculum: where training episodes start, never what they pay.

The cores take the curriculum as attributes read at every reset (:data:`ATTRIBUTES`), so a
trainer may change them between updates:

* ``box_by_door``: a share of the episodes (or ``True``/``False``) starts with boxes next
  to the doors inside (:func:`envs.hide_and_seek.layouts.random_layout`,
  :func:`envs.hide_and_seek.layouts_v1.quadrant_layout`);
* ``ramp_by_door`` (v1's quadrant): a share starts with the ramp near a door and a hider
  on its way there, ``ramp_reach`` (0 .. 1) saying how far
  (:func:`envs.hide_and_seek.layouts_v1.place_ramp_stage`).

Whether an episode gets a stage is drawn from its layout seed (:func:`drawn_share`), so
the same seed and shares always give the same start.
"""

from __future__ import annotations

import numpy as np

ATTRIBUTES = ("box_by_door", "ramp_by_door", "ramp_reach")
"""core attributes a curriculum may change between updates"""


def drawn_share(share: bool | float, seed: int, stream: int) -> bool:
    """A curriculum option that holds for ``share`` of the episodes, drawn from the layout seed."""
    share = float(share)
    return share >= 1.0 or (share > 0.0 and bool(np.random.default_rng([int(seed), stream]).random() < share))
