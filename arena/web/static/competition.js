/* Competition pages: live countdowns to each <time class="countdown">, and the boards refreshed
 * from /api/v1/competitions/{id}/board: the season's while open, the final evaluation's while it runs. */
"use strict";
(() => {
  const { num } = window.Arena;

  const pad = (n) => String(n).padStart(2, "0");

  /** "in 2 d 03:04:05" before the moment, "3 h ago"-style after it. */
  function countdown(iso) {
    const t = Date.parse(iso);
    if (Number.isNaN(t)) return "";
    let s = Math.round((t - Date.now()) / 1000);
    const future = s > 0;
    s = Math.abs(s);
    const days = Math.floor(s / 86400), rest = s % 86400;
    const clock = `${pad(Math.floor(rest / 3600))}:${pad(Math.floor(rest % 3600 / 60))}:${pad(rest % 60)}`;
    const text = days ? `${days} d ${clock}` : clock;
    return future ? `in ${text}` : `${text} ago`;
  }

  function tick() {
    for (const el of document.querySelectorAll("time.countdown[datetime]")) {
      if (!el.title) el.title = el.dateTime;
      el.textContent = countdown(el.dateTime);
    }
  }
  tick();
  setInterval(tick, 1000);

  // The season board while open, the final evaluation's while it runs.
  const boards = [...document.querySelectorAll("table.board-table[data-live='true']")];
  if (!boards.length) return;

  function cell(text, cls) {
    const td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text;
    return td;
  }

  function row(r) {
    const tr = document.createElement("tr");
    tr.dataset.agent = r.agent_id;
    if (r.reference) tr.className = "reference";
    const rank = cell("", "rank");
    const strong = document.createElement("strong");
    strong.textContent = r.rank;
    const range = document.createElement("span");
    range.className = "range";
    range.textContent = r.rank_lo === r.rank_hi ? "" : `${r.rank_lo}–${r.rank_hi}`;
    rank.append(strong, " ", range);
    const agent = cell("", "agent");
    const link = document.createElement("a");
    link.href = `/agents/${r.agent_id}`;
    link.textContent = r.name;
    agent.append(link);
    const team = cell(r.reference ? "" : r.team || "");
    if (r.reference) {
      const tag = document.createElement("span");
      tag.className = "tag";
      tag.textContent = "reference";
      team.append(tag);
    }
    tr.append(rank, agent, team, cell(num(r.conservative), "n strong"), cell(`${num(r.mu)} ± ${num(r.sigma)}`, "n"),
      cell(String(r.games), "n"), cell(`${r.wins} / ${r.draws} / ${r.losses}`, "n"));
    return tr;
  }

  async function refresh(board) {
    try {
      const response = await fetch(board.dataset.source, { headers: { Accept: "application/json" }, cache: "no-store" });
      if (!response.ok) return;
      const body = await response.json();
      if (body.data.length) board.tBodies[0].replaceChildren(...body.data.map(row));
    } catch (err) {
      // the next poll tries again
    }
  }
  for (const board of boards) setInterval(() => refresh(board), Number(board.dataset.pollMs) || 2000);
})();
