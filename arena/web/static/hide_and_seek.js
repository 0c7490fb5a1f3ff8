/* Hide-and-seek replay viewer: draws one frame of a grid match into #hs-grid.
 *
 * The frames come from the server (GET /api/v1/matches/{id}/frames, embedded in the page as
 * #frames-data): walls and doors once, then per step the boxes and ramps (with their locks and
 * who locked them), the agents by team (ringed when standing on a ramp), the seekers' lines of sight to
 * the hiders they see, and whether the step is in the preparation phase. replay.js owns the
 * controls (slider, play/pause, keys) and calls ArenaGrid.draw(i) for every step shown.
 */
"use strict";
window.ArenaGrid = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const el = (name, attrs, parent) => {
    const node = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    if (parent) parent.appendChild(node);
    return node;
  };
  const titled = (node, text) => { el("title", {}, node).textContent = text; return node; };
  let data = null;

  function init(frames) {
    data = frames;
  }

  function drawObject(layer, o, kind) {
    const g = el("g", {
      class: `hs-${kind}` + (o.lock ? ` locked lock-${o.lock}` : "") + (o.held_by != null ? " held" : ""),
      "data-id": o.id, "data-row": o.row, "data-col": o.col,
    }, layer);
    if (kind === "box") {
      el("rect", {x: o.col + 0.1, y: o.row + 0.1, width: 0.8, height: 0.8, rx: 0.08}, g);
    } else {
      el("polygon", {points: `${o.col + 0.1},${o.row + 0.9} ${o.col + 0.9},${o.row + 0.9} ${o.col + 0.9},${o.row + 0.1}`}, g);
    }
    let who = "";
    if (o.lock) {
      const by = o.locked_by != null ? data.agents[o.locked_by].name : o.lock;
      who = `, locked by ${by}`;
      const t = el("text", {x: o.col + 0.5, y: o.row + 0.68, "text-anchor": "middle", class: "lock-label"}, g);
      t.textContent = o.locked_by != null ? `L${o.locked_by}` : "L";
    }
    titled(g, `${kind} ${o.id} at (${o.row}, ${o.col})${who}` + (o.held_by != null ? `, held by ${data.agents[o.held_by].name}` : ""));
  }

  function draw(i) {
    const frame = data.frames[i];
    const svg = document.getElementById("hs-grid");
    const layer = svg.querySelector("#hs-dynamic");
    layer.replaceChildren();
    const center = (a) => [a.col + 0.5, a.row + 0.5];
    const byseat = new Map(frame.agents.map((a) => [a.seat, a]));
    const seen = new Set(frame.sight.map(([, h]) => h));
    for (const b of frame.boxes) drawObject(layer, b, "box");
    for (const r of frame.ramps) drawObject(layer, r, "ramp");
    for (const [s, h] of frame.sight) {
      const [x1, y1] = center(byseat.get(s)), [x2, y2] = center(byseat.get(h));
      titled(el("line", {class: "hs-sight", x1, y1, x2, y2}, layer),
        `${data.agents[s].name} sees ${data.agents[h].name}`);
    }
    for (const a of frame.agents) {
      const info = data.agents[a.seat];
      const [cx, cy] = center(a);
      const g = el("g", {class: `hs-agent team-${info.team}` + (seen.has(a.seat) ? " seen" : "") +
        (a.on_ramp ? " raised" : ""), "data-seat": a.seat}, layer);
      el("circle", {cx, cy, r: 0.36}, g);
      el("text", {x: cx, y: cy + 0.17, "text-anchor": "middle"}, g).textContent = String(a.seat);
      const held = a.holding >= 0 ? `, holding ${frame.ramps.some((r) => r.id === a.holding) ? "ramp" : "box"} ${a.holding}` : "";
      titled(g, `${info.name} (${info.team}) at (${a.row}, ${a.col})` + (a.on_ramp ? ", on a ramp" : "") + held +
        (seen.has(a.seat) ? ", seen" : ""));
    }
    const phase = document.getElementById("hs-phase");
    const t = frame.step;
    phase.className = "hs-phase " + (frame.prep ? "prep" : (frame.seen ? "seen" : "hidden"));
    phase.textContent = frame.prep
      ? `Preparation: step ${t} of ${data.prep_steps}, seekers frozen`
      : `Step ${t} of ${data.max_steps}: ` + (frame.seen ? "a seeker sees a hider" : "hiders hidden");
    svg.setAttribute("aria-label", `Grid after step ${t} of ${data.max_steps}`);
    svg.classList.toggle("prep", frame.prep);
    const text = document.getElementById("move-text");
    const last = data.frames.length - 1;
    let s = i === 0 ? "Start positions." : `Step ${t}.`;
    if (i === last) s += data.winner == null ? " Game over: draw." : ` Game over: ${data.winner === 0 ? "hiders" : "seekers"} win.`;
    text.textContent = s;
  }

  return {init, draw};
})();
