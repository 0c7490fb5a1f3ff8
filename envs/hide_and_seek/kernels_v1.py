"""Compiled kernels of ``hide_and_seek-v1`` (numba): step, masks, sight and observations.

Each kernel loops over envs and agents over the state arrays of
:class:`envs.hide_and_seek.core_v1.HideAndSeekV1Core` (the numpy reference) and computes
exactly what its numpy method does, cell by cell, with no Python per env or cell:

* :func:`masks` - :meth:`HideAndSeekV1Core.action_masks`;
* :func:`visibility` - :meth:`HideAndSeekV1Core.visibility` (ground-only and ramp sight);
* :func:`observe` - :meth:`HideAndSeekV1Core.observe`;
* :func:`step` - :meth:`HideAndSeekV1Core.step`: legality against the masks at the start of
  the step, the agents' actions in the rotating order (``_move`` with pushing and
  vaulting, ``_grab``, ``_lock``), time, sight, rewards, the door and ramp snapshots at the
  end of preparation, the phase detectors, then the new observations and masks;
* :func:`occupancy` - the agent and object maps of freshly loaded rows;
* :func:`critic_state` - :meth:`HideAndSeekV1Core.critic_state` (the central critic's input).

The compiled core (:class:`envs.hide_and_seek.compiled_v1.CompiledHideAndSeekV1Core`)
calls them; ``tests/envs/test_compiled_hide_and_seek_v1.py`` checks them against the
numpy core step for step. Kernels are compiled on first use and cached on disk
(``cache=True``), so a process pays the compile once per checkout.

Every index stays inside the grid because the core only loads layouts whose border is
walls and whose agents and objects start inside it (walls stop every move there).

Argument order, shared by all kernels (``S`` below): ``walls (n, s, s) bool``,
``agent_pos (n, A, 2) int64``, ``box_pos (n, B, 2) int64``, ``box_lock (n, B) int8``,
``box_holder (n, B) int64``, ``holding (n, A) int64``, ``agent_at (n, s, s) int64``,
``box_at (n, s, s) int64``, ``t (n,) int64``; then the constants ``team (A,) int64``,
``is_ramp (B,) bool``, ``prep_steps``, ``max_steps``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# The ids of envs.hide_and_seek.rules, as compile-time constants.
NOOP, GRAB, LOCK, NUM_ACTIONS = 0, 5, 6, 7
HIDERS, SEEKERS, UNLOCKED = 0, 1, -1
DY = np.array([-1, 0, 1, 0], dtype=np.int64)  # rules.MOVES: north, east, south, west
DX = np.array([0, 1, 0, -1], dtype=np.int64)


# Kernels are flat loops per env: a jitted helper that takes arrays costs reference counting
# on every call, so helpers are called once per env (or only on rare events), never per cell.


@njit(cache=True)
def _clip(v, size):
    return min(max(v, 0), size - 1)


@njit(cache=True)
def _env_masks(e, out, walls, agent_pos, box_pos, box_lock, box_holder, holding, agent_at, box_at, t,
               team, is_ramp, prep_steps, max_steps):
    """``out[e]``: the masks of env ``e`` (``action_masks``). Moves by ``_walkable`` / ``_free`` with
    other agents ignored and the pushed box's cell clipped, or a vault (``_vault_to``); grab and
    lock by ``_targets``."""
    size = walls.shape[1]
    for a in range(agent_pos.shape[1]):
        stop = t[e] >= max_steps or (team[a] == SEEKERS and t[e] < prep_steps)
        hold = holding[e, a]
        y, x = agent_pos[e, a, 0], agent_pos[e, a, 1]
        here = box_at[e, y, x]
        on_ramp = here >= 0 and is_ramp[here]
        grab, toggle = -1, -1
        out[e, a, NOOP] = True
        for d in range(4):
            ny, nx = y + DY[d], x + DX[d]
            obj = box_at[e, ny, nx]
            wall = walls[e, ny, nx]
            if obj >= 0:
                lock = box_lock[e, obj]
                free = lock == UNLOCKED and box_holder[e, obj] < 0 and not (is_ramp[obj] and agent_at[e, ny, nx] >= 0)
                if free and grab < 0:
                    grab = obj
                if (free or lock == team[a]) and toggle < 0:
                    toggle = obj
            ok = False
            if not stop:
                box = hold  # _carried: the object held, else an unlocked box nobody holds pushed
                if hold < 0 and obj >= 0 and not is_ramp[obj] and box_lock[e, obj] == UNLOCKED \
                        and box_holder[e, obj] < 0:
                    box = obj
                ramp_ok = obj >= 0 and is_ramp[obj] and box_holder[e, obj] < 0 and box < 0
                if not wall and (obj < 0 or obj == box or ramp_ok):
                    ok = True
                    if box >= 0:
                        by, bx = _clip(box_pos[e, box, 0] + DY[d], size), _clip(box_pos[e, box, 1] + DX[d], size)
                        other = box_at[e, by, bx]
                        ok = not walls[e, by, bx] and (other < 0 or other == box)
                if not ok and on_ramp and hold < 0:
                    ly, lx = y + 2 * DY[d], x + 2 * DX[d]
                    if 0 <= ly < size and 0 <= lx < size and (wall or (obj >= 0 and not is_ramp[obj])):
                        ok = not walls[e, ly, lx] and box_at[e, ly, lx] < 0
            out[e, a, 1 + d] = ok
        out[e, a, GRAB] = not stop and (hold >= 0 or grab >= 0)
        out[e, a, LOCK] = not stop and (hold >= 0 or toggle >= 0)


@njit(cache=True)
def masks(walls, agent_pos, box_pos, box_lock, box_holder, holding, agent_at, box_at, t, team, is_ramp,
          prep_steps, max_steps, out):
    """``out (n, A, 7) bool``: :meth:`HideAndSeekV1Core.action_masks` of every env."""
    for e in range(walls.shape[0]):
        _env_masks(e, out, walls, agent_pos, box_pos, box_lock, box_holder, holding, agent_at, box_at, t,
                   team, is_ramp, prep_steps, max_steps)


@njit(cache=True)
def _env_visibility(e, walls, agent_pos, box_at, is_ramp, in_range, between, ground, last):
    """``ground[e]``, ``last[e]``: sight from the ground only, and with ramps (``visibility``)."""
    size, n_agents = walls.shape[1], agent_pos.shape[1]
    rad = (in_range.shape[0] - 1) // 2
    for i in range(n_agents):
        yi, xi = agent_pos[e, i, 0], agent_pos[e, i, 1]
        here = box_at[e, yi, xi]
        up_i = here >= 0 and is_ramp[here]
        for j in range(n_agents):
            ground[e, i, j] = False
            last[e, i, j] = False
            if i == j:
                continue
            ry, rx = agent_pos[e, j, 0] - yi, agent_pos[e, j, 1] - xi
            if abs(ry) > rad or abs(rx) > rad or not in_range[ry + rad, rx + rad]:
                continue
            there = box_at[e, agent_pos[e, j, 0], agent_pos[e, j, 1]]
            up_j = there >= 0 and is_ramp[there]
            blocked, blocked_up = False, False
            for k in range(between.shape[2]):
                oy, ox = between[ry + rad, rx + rad, k, 0], between[ry + rad, rx + rad, k, 1]
                cy, cx = _clip(yi + oy, size), _clip(xi + ox, size)
                obj = box_at[e, cy, cx]
                if walls[e, cy, cx] or (obj >= 0 and not is_ramp[obj]):
                    blocked = True
                    by_observer = up_i and abs(oy) <= 1 and abs(ox) <= 1
                    by_target = up_j and abs(oy - ry) <= 1 and abs(ox - rx) <= 1
                    if not (by_observer or by_target):
                        blocked_up = True
                        break
            ground[e, i, j] = not blocked
            last[e, i, j] = not blocked_up


@njit(cache=True)
def visibility(walls, agent_pos, box_at, is_ramp, in_range, between, ground, last):
    """``ground``, ``last`` ``(n, A, A) bool``: :meth:`HideAndSeekV1Core.visibility` of every env."""
    for e in range(walls.shape[0]):
        _env_visibility(e, walls, agent_pos, box_at, is_ramp, in_range, between, ground, last)


@njit(cache=True)
def _observe_planes(view_size, size):
    """Scratch for :func:`_env_observe`: ``(5, size + 2h, size + 2h)`` float32 planes of the grid
    padded by ``h = view_size // 2`` (walls beyond the grid, nothing else)."""
    pad = size + 2 * (view_size // 2)
    planes = np.zeros((5, pad, pad), dtype=np.float32)
    planes[0] = 1.0
    return planes


@njit(cache=True)
def _env_observe(e, vis, out, planes, walls, agent_pos, box_lock, holding, box_at, t, team, is_ramp, prep_steps,
                 max_steps, view_size):
    """``out[e]``: the observations of env ``e`` (``observe``): v0's six window planes and seven flat
    features, then the ramps plane and the on-ramp flag. ``planes``: :func:`_observe_planes`, filled
    here with env ``e``'s walls, objects, objects locked by the hiders, by the seekers, and ramps."""
    size, n_agents = walls.shape[1], agent_pos.shape[1]
    v, half = view_size, view_size // 2
    area = v * v
    flat, ramps = 6 * area, 6 * area + 7
    for y in range(size):
        for x in range(size):
            obj = box_at[e, y, x]
            lock = box_lock[e, max(obj, 0)]
            planes[0, y + half, x + half] = walls[e, y, x]
            planes[1, y + half, x + half] = obj >= 0
            planes[2, y + half, x + half] = obj >= 0 and lock == HIDERS
            planes[3, y + half, x + half] = obj >= 0 and lock == SEEKERS
            planes[4, y + half, x + half] = obj >= 0 and is_ramp[obj]
    for i in range(n_agents):
        y, x = agent_pos[e, i, 0], agent_pos[e, i, 1]
        seeker = team[i] == SEEKERS
        own, opp = (3, 2) if seeker else (2, 3)  # own-team locks first
        o = out[e, i]
        for u in range(v):
            for w in range(v):
                k = u * v + w
                o[k] = planes[0, y + u, x + w]
                o[area + k] = planes[1, y + u, x + w]
                o[2 * area + k] = planes[own, y + u, x + w]
                o[3 * area + k] = planes[opp, y + u, x + w]
                o[ramps + k] = planes[4, y + u, x + w]
        o[4 * area : 6 * area] = 0.0
        for j in range(n_agents):
            ry, rx = agent_pos[e, j, 0] - y + half, agent_pos[e, j, 1] - x + half
            if not (0 <= ry < v and 0 <= rx < v):
                continue
            if team[i] == team[j]:
                if i != j:
                    o[4 * area + ry * v + rx] = 1.0
            elif vis[e, i, j]:
                o[5 * area + ry * v + rx] = 1.0
        o[flat] = t[e] < prep_steps
        o[flat + 1] = t[e] / max_steps
        o[flat + 2] = team[i] == HIDERS
        o[flat + 3] = seeker
        o[flat + 4] = holding[e, i] >= 0
        o[flat + 5] = y / (size - 1)
        o[flat + 6] = x / (size - 1)
        o[ramps + area] = planes[4, y + half, x + half]


@njit(cache=True)
def observe(walls, agent_pos, box_lock, holding, box_at, t, team, is_ramp, prep_steps, max_steps, view_size,
            vis, out):
    """``out (n, A, obs_dim) float32``: :meth:`HideAndSeekV1Core.observe` of every env given its sight."""
    planes = _observe_planes(view_size, walls.shape[1])
    for e in range(walls.shape[0]):
        _env_observe(e, vis, out, planes, walls, agent_pos, box_lock, holding, box_at, t, team, is_ramp, prep_steps,
                     max_steps, view_size)


@njit(cache=True)
def _door_status(e, doors, box_lock, box_at, is_ramp):
    """``(blocked, locked)``: every door holds a box (not a ramp); ... locked by the hiders."""
    blocked, locked = True, True
    for k in range(2):
        obj = box_at[e, doors[e, k, 0], doors[e, k, 1]]
        if not (obj >= 0 and not is_ramp[obj]):
            blocked = False
        if box_lock[e, max(obj, 0)] != HIDERS:
            locked = False
    return blocked, blocked and locked


@njit(cache=True)
def _ramps_defended(e, room, vault, box_pos, box_lock, ramp_ids):
    """Every ramp is inside the room, or locked by the hiders off the vault spots (``ramps_defended``)."""
    if len(ramp_ids) == 0:
        return False
    for b in ramp_ids:
        y, x = box_pos[e, b, 0], box_pos[e, b, 1]
        if not (room[e, y, x] or (box_lock[e, b] == HIDERS and not vault[e, y, x])):
            return False
    return True


@njit(cache=True)
def step(walls, agent_pos, box_pos, box_lock, box_holder, holding, agent_at, box_at, t, team, is_ramp,
         prep_steps, max_steps, doors, room, vault_spots, ramp_ids, in_range, between, view_size, actions,
         seen, prep_doors, vaulted, seen_steps, ramp_used, prep_ramps,
         obs, rewards, dones, out_masks, ground, last):
    """One :meth:`HideAndSeekV1Core.step` of every env, in place on the state; writes ``obs``,
    ``rewards``, ``dones``, ``out_masks`` and the sight ``ground`` / ``last``."""
    size, n_agents = walls.shape[1], agent_pos.shape[1]
    legal = np.empty((walls.shape[0], n_agents, NUM_ACTIONS), dtype=np.bool_)
    acts = np.empty(n_agents, dtype=np.int64)
    planes = _observe_planes(view_size, size)
    for e in range(walls.shape[0]):
        live = t[e] < max_steps
        rewarded = live and t[e] >= prep_steps
        for a in range(n_agents):
            vaulted[e, a] = False
        # Legality is judged on the state at the start of the step.
        _env_masks(e, legal, walls, agent_pos, box_pos, box_lock, box_holder, holding, agent_at, box_at, t,
                   team, is_ramp, prep_steps, max_steps)
        for a in range(n_agents):
            act = actions[e, a]
            safe = act if 0 <= act < NUM_ACTIONS else NOOP
            acts[a] = safe if live and legal[e, a, safe] else NOOP
        # The agents act in an order that rotates every step; an action impossible by then does nothing.
        for k in range(n_agents):
            a = (t[e] + k) % n_agents
            act = acts[a]
            y, x = agent_pos[e, a, 0], agent_pos[e, a, 1]
            hold = holding[e, a]
            if 1 <= act <= 4:  # _move: walk with what it carries, or vault from a ramp
                dy, dx = DY[act - 1], DX[act - 1]
                ny, nx = y + dy, x + dx
                obj = box_at[e, ny, nx]
                box = hold
                if hold < 0 and obj >= 0 and not is_ramp[obj] and box_lock[e, obj] == UNLOCKED \
                        and box_holder[e, obj] < 0:
                    box = obj
                walk = False
                ramp_ok = obj >= 0 and is_ramp[obj] and box_holder[e, obj] < 0 and box < 0
                if not walls[e, ny, nx] and (obj < 0 or obj == box or ramp_ok):
                    other = agent_at[e, ny, nx]
                    walk = other < 0 or other == a
                    if walk and box >= 0:
                        by, bx = box_pos[e, box, 0] + dy, box_pos[e, box, 1] + dx
                        other_box, other = box_at[e, by, bx], agent_at[e, by, bx]
                        walk = not walls[e, by, bx] and (other_box < 0 or other_box == box) \
                            and (other < 0 or other == a)
                vault = False
                here = box_at[e, y, x]
                if not walk and hold < 0 and here >= 0 and is_ramp[here]:
                    ly, lx = y + 2 * dy, x + 2 * dx
                    if 0 <= ly < size and 0 <= lx < size and (walls[e, ny, nx] or (obj >= 0 and not is_ramp[obj])):
                        vault = not walls[e, ly, lx] and box_at[e, ly, lx] < 0 and agent_at[e, ly, lx] < 0
                if walk or vault:
                    if vault:
                        ny, nx = y + 2 * dy, x + 2 * dx
                        vaulted[e, a] = True
                    # _relocate, in its order
                    agent_at[e, y, x] = -1
                    if box >= 0:
                        by, bx = box_pos[e, box, 0], box_pos[e, box, 1]
                        box_at[e, by, bx] = -1
                    agent_at[e, ny, nx] = a
                    if box >= 0:
                        box_at[e, by + dy, bx + dx] = box
                        box_pos[e, box, 0], box_pos[e, box, 1] = by + dy, bx + dx
                    agent_pos[e, a, 0], agent_pos[e, a, 1] = ny, nx
            elif act == GRAB or act == LOCK:
                grab, toggle = -1, -1  # _targets
                for d in range(4):
                    cy, cx = y + DY[d], x + DX[d]
                    adj = box_at[e, cy, cx]
                    if adj < 0:
                        continue
                    lock = box_lock[e, adj]
                    stood_on = is_ramp[adj] and agent_at[e, cy, cx] >= 0
                    free = lock == UNLOCKED and box_holder[e, adj] < 0 and not stood_on
                    if free and grab < 0:
                        grab = adj
                    if (free or lock == team[a]) and toggle < 0:
                        toggle = adj
                if act == GRAB:  # release the held object, or grab the first free one
                    if hold >= 0:
                        box_holder[e, hold] = -1
                        holding[e, a] = -1
                    elif grab >= 0:
                        holding[e, a] = grab
                        box_holder[e, grab] = a
                else:  # lock the held object (releasing it), else toggle the first this team may
                    box = hold if hold >= 0 else toggle
                    if box >= 0:
                        if hold >= 0:
                            box_holder[e, hold] = -1
                        holding[e, a] = -1
                        box_lock[e, box] = team[a] if box_lock[e, box] == UNLOCKED else UNLOCKED
        if live:
            t[e] += 1
        _env_visibility(e, walls, agent_pos, box_at, is_ramp, in_range, between, ground, last)
        hider_seen = False
        for i in range(n_agents):
            if team[i] == SEEKERS:
                for j in range(n_agents):
                    if team[j] == HIDERS and last[e, i, j]:
                        hider_seen = True
        seen[e] = hider_seen
        reward = (-1.0 if hider_seen else 1.0) * (1.0 if rewarded else 0.0)
        for a in range(n_agents):
            rewards[e, a] = reward if team[a] == HIDERS else -reward
        now = live and t[e] == prep_steps
        if now:
            prep_doors[e, 0], prep_doors[e, 1] = _door_status(e, doors, box_lock, box_at, is_ramp)
        dones[e] = t[e] >= max_steps
        _env_observe(e, last, obs, planes, walls, agent_pos, box_lock, holding, box_at, t, team, is_ramp, prep_steps,
                     max_steps, view_size)
        _env_masks(e, out_masks, walls, agent_pos, box_pos, box_lock, box_holder, holding, agent_at, box_at, t,
                   team, is_ramp, prep_steps, max_steps)
        # The phase detectors (HideAndSeekV1Core.step after v0's step).
        if hider_seen and rewarded:
            seen_steps[e] += 1
        used = False
        for i in range(n_agents):
            if team[i] != SEEKERS:
                continue
            extra = False
            for j in range(n_agents):
                if team[j] == HIDERS and last[e, i, j] and not ground[e, i, j]:
                    extra = True
            here = box_at[e, agent_pos[e, i, 0], agent_pos[e, i, 1]]
            if vaulted[e, i] or (here >= 0 and is_ramp[here] and extra):
                used = True
        if live and used:
            ramp_used[e] = True
        if now:
            prep_ramps[e] = _ramps_defended(e, room, vault_spots, box_pos, box_lock, ramp_ids)


@njit(cache=True)
def occupancy(rows, agent_pos, box_pos, n_boxes, agent_at, box_at):
    """The agent and object maps of ``rows`` from the positions (``_load``)."""
    for e in rows:
        agent_at[e, :, :] = -1
        box_at[e, :, :] = -1
        for a in range(agent_pos.shape[1]):
            agent_at[e, agent_pos[e, a, 0], agent_pos[e, a, 1]] = a
        for b in range(n_boxes):
            box_at[e, box_pos[e, b, 0], box_pos[e, b, 1]] = b


@njit(cache=True)
def _write_cells(out, e, c, grid):
    """``out[e, c:]``: env ``e``'s bool ``grid`` cell by cell, as 0/1; returns the next column."""
    for y in range(grid.shape[1]):
        for x in range(grid.shape[2]):
            out[e, c] = 1.0 if grid[e, y, x] else 0.0
            c += 1
    return c


@njit(cache=True)
def critic_state(walls, agent_pos, box_pos, box_lock, holding, box_at, t, is_ramp, prep_steps, max_steps,
                 doors, room, vault, seen, seen_steps, ramp_used, out):
    """``out (n, d) float32``: :meth:`HideAndSeekV1Core.critic_state`, feature by feature in its
    order (v0's: agents' positions, held box one-hot, boxes' positions, lock one-hot, doors, door
    status, step, preparation, seen, walls; then standing on a ramp, ramps defended, seen share,
    ramp used, the room), each computed in float64 and rounded to float32 as it does."""
    n, size = walls.shape[0], walls.shape[1]
    agents, boxes = agent_pos.shape[1], box_pos.shape[1]
    scale = size - 1
    post = max(max_steps - prep_steps, 1)
    for e in range(n):
        c = 0
        for a in range(agents):
            for k in range(2):
                out[e, c] = agent_pos[e, a, k] / scale
                c += 1
        for a in range(agents):
            for b in range(boxes):
                out[e, c] = 1.0 if holding[e, a] == b else 0.0
                c += 1
        for b in range(boxes):
            for k in range(2):
                out[e, c] = box_pos[e, b, k] / scale
                c += 1
        for b in range(boxes):
            lock = box_lock[e, b]
            out[e, c] = 1.0 if lock == UNLOCKED else 0.0
            out[e, c + 1] = 1.0 if lock == HIDERS else 0.0
            out[e, c + 2] = 1.0 if lock == SEEKERS else 0.0
            c += 3
        for d in range(doors.shape[1]):
            for k in range(2):
                out[e, c] = doors[e, d, k] / scale
                c += 1
        blocked, locked = True, True  # v1's _door_status: a ramp in a door does not block it
        for d in range(doors.shape[1]):
            obj = box_at[e, doors[e, d, 0], doors[e, d, 1]]
            if obj < 0 or is_ramp[obj]:
                blocked = False
            if box_lock[e, max(obj, 0)] != HIDERS:
                locked = False
        out[e, c] = 1.0 if blocked else 0.0
        out[e, c + 1] = 1.0 if blocked and locked else 0.0
        out[e, c + 2] = t[e] / max_steps
        out[e, c + 3] = 1.0 if t[e] < prep_steps else 0.0
        out[e, c + 4] = 1.0 if seen[e] else 0.0
        c = _write_cells(out, e, c + 5, walls)
        for a in range(agents):
            obj = box_at[e, agent_pos[e, a, 0], agent_pos[e, a, 1]]
            out[e, c] = 1.0 if obj >= 0 and is_ramp[obj] else 0.0
            c += 1
        defended, ramps = True, 0
        for b in range(boxes):
            if is_ramp[b]:
                ramps += 1
                y, x = box_pos[e, b, 0], box_pos[e, b, 1]
                if not (room[e, y, x] or (box_lock[e, b] == HIDERS and not vault[e, y, x])):
                    defended = False
        out[e, c] = 1.0 if defended and ramps > 0 else 0.0
        out[e, c + 1] = seen_steps[e] / post
        out[e, c + 2] = 1.0 if ramp_used[e] else 0.0
        _write_cells(out, e, c + 3, room)
