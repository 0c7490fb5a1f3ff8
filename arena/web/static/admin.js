/* Admin integrity view: fetches /api/v1/admin/integrity and draws the flags. Signed in as an admin, the
 * session cookie authenticates the GET; otherwise the admin's bearer token typed into the page, kept in
 * the input only (never stored in localStorage or sessionStorage). */
"use strict";
(() => {
  const form = document.getElementById("integrity-form");
  if (!form) return;
  const { num, pct, el } = window.Arena;
  const status = document.getElementById("integrity-status");
  const tokenInput = document.getElementById("admin-token");  // absent when signed in as an admin

  const who = (a) => el("span", {}, el("a", { href: `/agents/${a.agent_id}` }, a.name), a.owner ? ` (${a.owner})` : "");
  const empty = (cols, text) => el("tr", { class: "empty" }, el("td", { colspan: cols }, text));

  function pairRow(f) {
    return el("tr", { class: "flag" },
      el("td", {}, who(f.beneficiary)), el("td", {}, who(f.thrower)), el("td", {}, f.same_owner ? "yes" : "no"),
      el("td", { class: "n" }, `${f.wins} / ${f.draws} / ${f.losses}`),
      el("td", { class: "n" }, pct(f.expected_win_share)), el("td", { class: "n" }, pct(f.observed_win_share)),
      el("td", { class: "n" }, f.adjusted_p.toExponential(1)));
  }

  function dependenceRow(f) {
    return el("tr", { class: "flag" },
      el("td", {}, who(f.agent)), el("td", {}, who(f.opponent)), el("td", {}, f.direction),
      el("td", { class: "n" }, num(f.mu)), el("td", { class: "n" }, num(f.mu_without)),
      el("td", { class: "n" }, num(f.shift_sigmas, 1)), el("td", { class: "n" }, `${f.games_vs_opponent} of ${f.games}`));
  }

  function cloneRow(f) {
    return el("tr", { class: "flag" },
      el("td", {}, who(f.earlier)), el("td", {}, who(f.later)), el("td", {}, f.role),
      el("td", { class: "n" }, pct(f.agreement)), el("td", { class: "n" }, f.mean_kl.toExponential(1)),
      el("td", { class: "n" }, String(f.positions)));
  }

  function showClones(c) {
    document.querySelector("#integrity-clones tbody").replaceChildren(
      ...(c.flags.length ? c.flags.map(cloneRow) : [empty(6, "No two owners' agents play as one policy.")]));
    const missing = (c.not_fingerprinted.length ? `; ${c.not_fingerprinted.length} could not be run` : "") +
      (c.pending && c.pending.length ? `; ${c.pending.length} queued (ask again shortly)` : "");
    document.getElementById("clones-status").textContent =
      `${c.fingerprinted} neural agents fingerprinted (positions per role: ${JSON.stringify(c.positions)})${missing}; ` +
      `flagged at >= ${pct(c.min_agreement)} same best action and mean KL <= ${c.max_kl}; ` +
      `${c.families.length} same-owner families.`;
  }

  async function check(event) {
    if (event) event.preventDefault();
    const token = tokenInput ? tokenInput.value.trim() : "";
    if (tokenInput && !token) return;
    const headers = { Accept: "application/json" };
    if (token) headers.Authorization = `Bearer ${token}`;
    const env = document.getElementById("integrity-env").value;
    status.textContent = "Checking…";
    const response = await fetch(`${form.dataset.source}?env=${encodeURIComponent(env)}`,
      { headers });
    const body = await response.json();
    if (!response.ok) {
      status.textContent = body.detail || `error ${response.status}`;
      return;
    }
    document.querySelector("#integrity-pairs tbody").replaceChildren(
      ...(body.pairs.length ? body.pairs.map(pairRow) : [empty(7, "No pair flagged.")]));
    document.querySelector("#integrity-dependence tbody").replaceChildren(
      ...(body.dependence.length ? body.dependence.map(dependenceRow) : [empty(7, "No rating rests on one opponent.")]));
    showClones(body.clones);
    status.textContent = `${body.matches} rated matches of ${body.env} examined: ${body.pairs.length} pair flags, ` +
      `${body.dependence.length} dependence flags (family-wise level ${body.alpha}); ${body.clones.flags.length} clone flags.`;
  }

  form.addEventListener("submit", check);
  if (!tokenInput) check();
})();
