/* Live leaderboard: polls the JSON API and redraws the table, flashing rows that changed. */
"use strict";
(() => {
  const table = document.getElementById("leaderboard");
  if (!table) return;
  const { num, pct, el, refreshTimes, steps } = window.Arena;
  const source = table.dataset.source;
  const period = Number(table.dataset.pollMs) || 2000;
  const status = document.getElementById("live-status");
  const count = document.getElementById("lb-count");
  const state = (games, mu, sigma, rank) => `${games}|${Number(mu).toFixed(6)}|${Number(sigma).toFixed(6)}|${rank}`;

  // What the server rendered is the baseline: only later changes flash.
  let previous = new Map();
  for (const [i, tr] of [...table.tBodies[0].rows].entries()) {
    if (tr.dataset.agent) previous.set(tr.dataset.agent, state(tr.dataset.games, tr.dataset.mu, tr.dataset.sigma, i + 1));
  }

  function setStatus(kind, text) {
    if (!status) return;
    status.classList.toggle("on", kind === "on");
    status.classList.toggle("error", kind === "error");
    status.querySelector(".text").textContent = text;
  }

  function rangeText(r) {
    return r.rank_lo == null || r.rank_hi == null || r.rank_lo === r.rank_hi ? "" : `${r.rank_lo}–${r.rank_hi}`;
  }

  // Same text as the server's probe_text filter.
  function probeText(r) {
    if (r.probe_win_rate == null) return "—";
    const p = (v) => pct(v, 0);
    return `${p(r.probe_win_rate)} [${p(r.probe_ci_low)}–${p(r.probe_ci_high)}] @${steps(r.probe_budget_env_steps)}`;
  }

  function row(r, lo, span) {
    const pos = (v) => (((v - lo) / span) * 100).toFixed(1) + "%";
    const tags = [el("span", { class: `tag kind-${r.kind}` }, r.kind)];
    if (r.status !== "rated") tags.push(" ", el("span", { class: `tag status-${r.status}` }, r.status));
    return el("tr", { "data-agent": r.agent_id, "data-games": r.games, "data-mu": r.mu, "data-sigma": r.sigma },
      el("td", { class: "rank" }, el("strong", {}, r.rank), " ", el("span", { class: "range", title: "plausible ranks" }, rangeText(r))),
      el("td", { class: "agent" }, el("a", { href: `/agents/${r.agent_id}` }, r.name), " ", ...tags),
      el("td", { class: "n strong" }, num(r.conservative)),
      el("td", { class: "n" }, num(r.mu)),
      el("td", { class: "n" }, num(r.sigma)),
      el("td", { class: "ci" },
        el("span", { class: "ci-text" }, `${num(r.ci_low, 1)} – ${num(r.ci_high, 1)}`),
        el("span", { class: "ci-bar", "aria-hidden": "true" },
          el("span", { style: `left: ${pos(r.ci_low)}; width: ${(((r.ci_high - r.ci_low) / span) * 100).toFixed(1)}%` }),
          el("i", { style: `left: ${pos(r.mu)}` }))),
      el("td", { class: "n" }, r.games),
      el("td", { class: "n" }, `${r.wins} / ${r.draws} / ${r.losses}`),
      el("td", { class: "n" }, pct(r.win_rate)),
      el("td", { class: "n probe" }, probeText(r)),
      el("td", {}, el("time", { class: "ago", datetime: r.last_match_at || "" }, r.last_match_at || "—")));
  }

  function render(body) {
    const rows = body.data || [];
    const lo = Math.min(...rows.map((r) => r.ci_low));
    const hi = Math.max(...rows.map((r) => r.ci_high));
    const span = hi > lo ? hi - lo : 1;
    const next = new Map();
    const trs = rows.map((r, i) => {
      const tr = row(r, lo, span);
      const s = state(r.games, r.mu, r.sigma, i + 1);
      next.set(String(r.agent_id), s);
      if (previous.get(String(r.agent_id)) !== s) tr.classList.add("changed");
      return tr;
    });
    if (!trs.length) trs.push(el("tr", { class: "empty" }, el("td", { colspan: 11 }, "No rated agents yet.")));
    table.tBodies[0].replaceChildren(...trs);
    previous = next;
    if (count) count.textContent = body.count;
    refreshTimes(table);
    table.dataset.updates = String(Number(table.dataset.updates || 0) + 1);
  }

  async function poll() {
    if (!document.hidden) {
      try {
        const response = await fetch(source, { headers: { Accept: "application/json" }, cache: "no-store" });
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        render(await response.json());
        setStatus("on", "Live");
      } catch (err) {
        setStatus("error", "Offline, retrying…");
      }
    }
    setTimeout(poll, period);
  }
  setStatus("on", "Live");
  setTimeout(poll, period);
})();
