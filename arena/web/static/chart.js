/* Rating-history chart: μ line, 95% band (μ ± 1.96σ) and μ − 3σ, drawn as inline SVG. */
"use strict";
(() => {
  const svg = document.getElementById("rating-chart");
  const dataEl = document.getElementById("rating-history");
  if (!svg || !dataEl) return;
  const history = JSON.parse(dataEl.textContent);
  const roles = Object.keys(history);
  const NS = "http://www.w3.org/2000/svg";
  let role = roles[0];

  const node = (tag, attrs) => {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
    return n;
  };

  /** Round, evenly spaced tick values covering [lo, hi]. */
  function ticks(lo, hi, count = 5) {
    const raw = (hi - lo) / count;
    const mag = 10 ** Math.floor(Math.log10(raw));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) out.push(v);
    return out;
  }

  function draw() {
    const points = history[role] || [];
    const width = Math.max(svg.clientWidth, 300);
    const height = Math.max(svg.clientHeight, 200);
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.setAttribute("preserveAspectRatio", "xMidYMid meet");
    svg.replaceChildren();
    if (points.length === 0) {
      const t = node("text", { x: width / 2, y: height / 2, "text-anchor": "middle" });
      t.textContent = "No rated matches yet";
      svg.append(t);
      return;
    }
    const pad = { l: 44, r: 12, t: 10, b: 26 };
    const upper = points.map((p) => p.mu + 1.96 * p.sigma);
    const lower = points.map((p) => p.mu - 1.96 * p.sigma);
    const cons = points.map((p) => p.mu - 3 * p.sigma);
    let yLo = Math.min(...lower, ...cons), yHi = Math.max(...upper);
    if (yHi - yLo < 1) { yLo -= 0.5; yHi += 0.5; }
    const xLo = points[0].match_seq, xHi = points[points.length - 1].match_seq;
    const x = (seq) => pad.l + (xHi > xLo ? (seq - xLo) / (xHi - xLo) : 0.5) * (width - pad.l - pad.r);
    const y = (v) => pad.t + (1 - (v - yLo) / (yHi - yLo)) * (height - pad.t - pad.b);

    for (const v of ticks(yLo, yHi)) {
      svg.append(node("line", { class: "grid", x1: pad.l, x2: width - pad.r, y1: y(v), y2: y(v) }));
      const label = node("text", { x: pad.l - 6, y: y(v) + 4, "text-anchor": "end" });
      label.textContent = Number.isInteger(v) ? v : v.toFixed(1);
      svg.append(label);
    }
    const xs = points.map((p) => x(p.match_seq));
    const line = (values) => values.map((v, i) => `${i ? "L" : "M"}${xs[i].toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    const band = line(upper) + " " + lower.map((v, i) => [xs[i], y(v)]).reverse()
      .map(([px, py]) => `L${px.toFixed(1)},${py.toFixed(1)}`).join(" ") + " Z";
    svg.append(node("path", { class: "band", d: band }));
    svg.append(node("path", { class: "cons", d: line(cons) }));
    const mu = node("path", { class: "mu", d: line(points.map((p) => p.mu)), "data-points": points.length });
    svg.append(mu);
    const caption = node("text", { x: width - pad.r, y: height - 6, "text-anchor": "end" });
    caption.textContent = `match log #${xLo} → #${xHi}`;
    svg.append(caption);
    const last = points[points.length - 1];
    svg.setAttribute("aria-label",
      `${role}: μ ${points[0].mu.toFixed(2)} → ${last.mu.toFixed(2)}, σ ${points[0].sigma.toFixed(2)} → ${last.sigma.toFixed(2)} over ${points.length} points`);
  }

  const buttons = document.querySelectorAll("#chart-roles button");
  for (const b of buttons) {
    b.addEventListener("click", () => {
      role = b.dataset.role;
      for (const o of buttons) o.setAttribute("aria-pressed", String(o === b));
      draw();
    });
  }
  let pending = 0;
  window.addEventListener("resize", () => { cancelAnimationFrame(pending); pending = requestAnimationFrame(draw); });
  draw();
})();
