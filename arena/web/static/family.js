/* Agent page: its versions (the owner's agents that play as one policy with it), from GET /agents/{id}/family. */
"use strict";
(() => {
  const section = document.getElementById("family-section");
  const table = document.getElementById("family");
  if (!section || !table) return;
  const { pct, el, refreshTimes } = window.Arena;
  const empty = (text) => el("tr", { class: "empty" }, el("td", { colspan: "5" }, text));

  function row(m) {
    const name = m.this ? el("strong", {}, `${m.name} (this agent)`) : el("a", { href: `/agents/${m.agent_id}` }, m.name);
    return el("tr", m.this ? { "aria-current": "true" } : {},
      el("th", { scope: "row" }, name),
      el("td", {}, el("span", { class: `tag status-${m.status}` }, m.status)),
      el("td", {}, el("time", { class: "ago", datetime: m.created_at }, m.created_at)),
      el("td", { class: "n" }, pct(m.agreement)),
      el("td", { class: "n" }, Number(m.mean_kl).toExponential(1)));
  }

  async function load() {
    const body = table.tBodies[0];
    try {
      const response = await fetch(section.dataset.source, { headers: { Accept: "application/json" } });
      const family = await response.json();
      if (!response.ok) {
        body.replaceChildren(empty(family.detail || `error ${response.status}`));
        return;
      }
      if (family.members.length) {
        body.replaceChildren(...family.members.map(row));
        refreshTimes(table);
      } else if (family.status === "pending") {
        body.replaceChildren(empty("Fingerprints are being computed; this list fills in by itself."));
      } else if (family.status === "failed") {
        body.replaceChildren(empty(`No fingerprint: its policy could not be run on the positions (${family.error}).`));
      } else {
        body.replaceChildren(empty(family.positions
          ? `No version: none of its owner's other agents plays like it (${family.positions} positions of ${family.role}).`
          : "No fingerprint: its policy could not be run on the positions."));
      }
      if (family.status === "pending") setTimeout(load, 3000);  // 202: queued for the background service
    } catch (error) {
      body.replaceChildren(empty(`Could not load its versions: ${error}`));
    }
  }

  load();
})();
