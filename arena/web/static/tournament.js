/* The tournament page, live: while the tournament runs, poll /api/v1/tournaments/{id} and redraw
 * the standings, the crosstable (round robin, Swiss) or the bracket (elimination) and the rounds. */
"use strict";
(() => {
  const root = document.getElementById("tournament");
  if (!root || root.dataset.live !== "true") return;

  /** 1, ½, 2½: as the server renders points. */
  function points(v) {
    if (v === null || v === undefined) return "";
    const whole = Math.trunc(v), half = v - whole >= 0.5;
    return whole === 0 ? (half ? "½" : "0") : `${whole}${half ? "½" : ""}`;
  }

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = text;
    if (cls) node.className = cls;
    return node;
  }

  function agentLink(id, name) {
    const a = el("a", name);
    a.href = `/agents/${id}`;
    return a;
  }

  function standings(t) {
    const body = document.querySelector("#standings tbody");
    const bracket = t.kind === "single_elimination";
    body.replaceChildren(...t.standings.map((s) => {
      const tr = el("tr");
      tr.dataset.agent = s.agent_id;
      const rank = el("td", null, "rank");
      rank.append(el("strong", String(s.rank)));
      const agent = el("td", null, "agent");
      agent.append(agentLink(s.agent_id, s.name));
      tr.append(rank, agent, el("td", points(s.points), "n strong"),
        el("td", bracket ? String(Math.trunc(s.tiebreak)) : points(s.tiebreak), "n"), el("td", points(s.game_points), "n"),
        el("td", `${s.wins} / ${s.draws} / ${s.losses}`, "n"), el("td", String(s.byes), "n"));
      return tr;
    }));
  }

  function crosstable(t) {
    const table = document.getElementById("crosstable");
    if (!table) return;
    const cells = new Map(t.crosstable.map((row) => [row.agent_id,
      new Map(row.against.map((m) => [m.agent_id, m.points.map(points).join(" ")]))]));
    table.tBodies[0].replaceChildren(...t.entrants.map((e) => {
      const tr = el("tr");
      tr.dataset.agent = e.agent_id;
      const agent = el("td", null, "agent");
      agent.append(agentLink(e.agent_id, e.name));
      tr.append(el("td", String(e.seed)), agent);
      for (const o of t.entrants) {
        const td = el("td", o.agent_id === e.agent_id ? "—" : cells.get(e.agent_id).get(o.agent_id) || "", "n");
        td.dataset.against = o.agent_id;
        tr.append(td);
      }
      return tr;
    }));
  }

  function bracket(t, names, seeds) {
    const box = document.getElementById("bracket");
    if (!box) return;
    box.replaceChildren(...t.rounds.map((r) => {
      const col = el("div", null, "bracket-round");
      col.dataset.round = r.round;
      col.append(el("h3", `Round ${r.round}`));
      for (const tb of r.tables) {
        const match = el("div", null, "bracket-match");
        match.dataset.table = tb.table;
        const side = (id, mine) => {
          const div = el("div", null, "bracket-side" + (tb.b !== null && id === tb.advances ? " winner" : ""));
          if (id === null) div.append(el("span", "bye", "muted"));
          else div.append(el("span", String(seeds.get(id)), "seed"), ` ${names.get(id)} `, el("span", points(mine), "n"));
          return div;
        };
        match.append(side(tb.a, tb.points_a), side(tb.b, tb.points_b));
        col.append(match);
      }
      return col;
    }));
  }

  function rounds(t, names) {
    const box = document.getElementById("rounds");
    const parts = [];
    for (const r of t.rounds) {
      parts.push(el("h3", `Round ${r.round}`));
      const table = el("table", null, "board-table rounds-table");
      table.dataset.round = r.round;
      const head = el("thead");
      const hr = el("tr");
      for (const [label, cls] of [["Table"], ["First"], ["Result", "n"], ["Second"], ["Games"]]) {
        const th = el("th", label, cls);
        th.scope = "col";
        hr.append(th);
      }
      head.append(hr);
      const body = el("tbody");
      for (const tb of r.tables) {
        const tr = el("tr");
        tr.dataset.table = tb.table;
        const result = tb.b === null ? "bye" : tb.complete ? `${points(tb.points_a)} – ${points(tb.points_b)}` : "playing";
        const games = el("td");
        for (const g of tb.games) {
          if (g.score_a === null) games.append(el("span", "·", "muted"));
          else {
            const a = el("a", points(g.score_a));
            a.href = `/matches/${g.match_id}`;
            games.append(a);
          }
          games.append(" ");
        }
        tr.append(el("td", String(tb.table)), el("td", names.get(tb.a)), el("td", result, "n"),
          el("td", tb.b === null ? "" : names.get(tb.b)), games);
        body.append(tr);
      }
      table.append(head, body);
      parts.push(table);
    }
    box.replaceChildren(...parts);
  }

  function draw(t) {
    const names = new Map(t.entrants.map((e) => [e.agent_id, e.name]));
    const seeds = new Map(t.entrants.map((e) => [e.agent_id, e.seed]));
    const state = document.getElementById("tournament-state");
    state.textContent = t.state;
    state.className = `tag state-${t.state}`;
    document.getElementById("round-now").textContent = String(t.rounds.length);
    document.getElementById("games-played").textContent = String(t.games_played);
    const error = document.getElementById("tournament-error");
    error.textContent = t.error;
    error.hidden = !t.error;
    standings(t);
    crosstable(t);
    bracket(t, names, seeds);
    rounds(t, names);
  }

  let timer = null;
  async function refresh() {
    try {
      const response = await fetch(root.dataset.source, { headers: { Accept: "application/json" }, cache: "no-store" });
      if (!response.ok) return;
      const t = await response.json();
      draw(t);
      if (t.state !== "running") {
        clearInterval(timer);
        root.dataset.live = "false";
      }
    } catch (err) {
      // the next poll tries again
    }
  }
  timer = setInterval(refresh, Number(root.dataset.pollMs) || 2000);
})();
