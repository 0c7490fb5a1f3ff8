/* Agent page: while a probe is queued or running, poll its progress and redraw the probes table. */
"use strict";
(() => {
  const section = document.getElementById("probes-section");
  const table = document.getElementById("probes");
  if (!section || !table) return;
  const { pct, el, refreshTimes, steps } = window.Arena;
  const period = Number(section.dataset.pollMs) || 2000;
  const open = (s) => s === "queued" || s === "running";

  // The same cells as the server renders (agent.html).
  function row(p) {
    const status = [el("span", { class: `tag probe-${p.status}` }, p.status)];
    if (p.error) status.push(" ", el("span", { class: "muted small" }, p.error));
    const done = p.win_rate !== null && p.win_rate !== undefined;
    return el("tr", { "data-probe": p.id, "data-status": p.status },
      el("td", {}, `#${p.id}`),
      el("td", {}, ...status),
      el("td", { class: "n" }, `${steps(p.budget_env_steps)} steps`),
      el("td", {}, el("progress", { max: "1", value: String(p.progress), "aria-label": `trained ${pct(p.progress, 0)} of the budget` }), " ", pct(p.progress, 0)),
      el("td", { class: "n strong" }, pct(p.win_rate)),
      el("td", {}, done ? `${pct(p.ci_low)} – ${pct(p.ci_high)}` : "—"),
      el("td", { class: "n" }, p.games ? `${p.wins} / ${p.draws} / ${p.losses}` : "—"),
      el("td", {}, p.requested_by),
      el("td", {}, el("time", { class: "ago", datetime: p.finished_at || "" }, p.finished_at || "—")));
  }

  async function poll() {
    try {
      const response = await fetch(section.dataset.source, { headers: { Accept: "application/json" } });
      if (response.ok) {
        const body = await response.json();
        if (body.data.length) {
          table.tBodies[0].replaceChildren(...body.data.map(row));
          refreshTimes(table);
        }
        if (!body.data.some((p) => open(p.status))) return;  // nothing left to follow
      }
    } catch (e) { /* a failed poll is retried */ }
    setTimeout(poll, period);
  }

  if ([...table.tBodies[0].rows].some((tr) => open(tr.dataset.status))) setTimeout(poll, period);
})();
