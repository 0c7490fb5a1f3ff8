/* Replay viewer: step through a match's frames with buttons, the slider or the keyboard. */
"use strict";
(() => {
  const dataEl = document.getElementById("frames-data");
  if (!dataEl) return;
  const data = JSON.parse(dataEl.textContent);
  const frames = data.frames;
  const last = frames.length - 1;
  const $ = (id) => document.getElementById(id);
  const scrub = $("scrub"), label = $("step-label"), text = $("move-text"), playBtn = $("btn-play");
  const moveButtons = [...document.querySelectorAll("#move-list button")];
  const NS = "http://www.w3.org/2000/svg";
  const winning = new Set((data.win_cells || []).map(([r, c]) => `${r},${c}`));
  let index = last;
  let timer = 0;
  if (data.kind === "grid") window.ArenaGrid.init(data);

  function describeBoardMove(i) {
    if (i === 0) return "Start: empty board.";
    const m = data.moves[i - 1];
    const who = `${data.seats[m.seat]} (seat ${m.seat})`;
    const where = data.env === "tictactoe-v3" ? `row ${m.row + 1}, column ${m.col + 1}` : `column ${m.col + 1}`;
    let s = `Move ${i}: ${who} played ${where}.`;
    if (i === last) s += data.winner == null ? " Game over: draw." : ` Game over: ${data.seats[data.winner]} wins.`;
    if (i === last && data.illegal) s += ` Then seat ${data.illegal.seat} tried illegal action ${data.illegal.action}.`;
    return s;
  }

  function drawBoard(i) {
    const board = $("board");
    const cells = board.children;
    const move = i > 0 ? data.moves[i - 1] : null;
    let k = 0;
    for (const [r, row] of frames[i].entries()) {
      for (const [c, v] of row.entries()) {
        const cell = cells[k++];
        cell.className = `cell p${v}` + (move && move.row === r && move.col === c ? " last" : "") +
          (i === last && winning.has(`${r},${c}`) ? " win" : "");
      }
    }
    board.setAttribute("aria-label", `Board after move ${i} of ${last}`);
    text.textContent = describeBoardMove(i);
  }

  function drawWorld(i) {
    const svg = $("world");
    const frame = frames[i];
    for (const e of frame.entities) {
      const c = svg.querySelector(`circle[data-name="${CSS.escape(e.name)}"]`);
      if (c) { c.setAttribute("cx", e.x); c.setAttribute("cy", -e.y); }
    }
    for (const old of svg.querySelectorAll("polyline.trail")) old.remove();
    const first = svg.querySelector("circle");
    for (const e of frame.entities) {
      if (e.role === "obstacle") continue;
      const pts = frames.slice(0, i + 1).map((f) => f.entities.find((o) => o.name === e.name))
        .filter(Boolean).map((o) => `${o.x},${-o.y}`).join(" ");
      const trail = document.createElementNS(NS, "polyline");
      trail.setAttribute("class", `trail ${e.role}`);
      trail.setAttribute("points", pts);
      svg.insertBefore(trail, first);
    }
    svg.setAttribute("aria-label", `Positions after step ${frame.step} of ${frames[last].step}`);
    text.textContent = i === 0 ? "Start positions." : `Step ${frame.step} of ${frames[last].step}.` +
      (i === last ? (data.winner === 0 ? " Predators tagged the prey." : " The prey escaped.") : "");
  }

  function show(i) {
    index = Math.max(0, Math.min(last, i));
    if (data.kind === "board") drawBoard(index);
    else if (data.kind === "grid") window.ArenaGrid.draw(index);
    else drawWorld(index);
    scrub.value = String(index);
    label.textContent = `${index} / ${last}`;
    for (const [k, b] of moveButtons.entries()) {
      if (k + 1 === index) b.setAttribute("aria-current", "step"); else b.removeAttribute("aria-current");
    }
  }

  function setPlayIcon(playing) {
    playBtn.querySelector(".icon-play").style.display = playing ? "none" : "";
    playBtn.querySelector(".icon-pause").style.display = playing ? "" : "none";
    playBtn.setAttribute("aria-label", playing ? "Pause" : "Play");
  }

  function stop() {
    clearInterval(timer);
    timer = 0;
    setPlayIcon(false);
  }
  function play() {
    if (timer) return stop();
    if (index >= last) show(0);
    setPlayIcon(true);
    timer = setInterval(() => { if (index >= last) stop(); else show(index + 1); }, {board: 600, grid: 250}[data.kind] || 180);
  }

  $("btn-first").addEventListener("click", () => { stop(); show(0); });
  $("btn-prev").addEventListener("click", () => { stop(); show(index - 1); });
  $("btn-next").addEventListener("click", () => { stop(); show(index + 1); });
  $("btn-last").addEventListener("click", () => { stop(); show(last); });
  playBtn.addEventListener("click", play);
  scrub.addEventListener("input", () => { stop(); show(Number(scrub.value)); });
  for (const b of moveButtons) b.addEventListener("click", () => { stop(); show(Number(b.dataset.step)); });
  document.addEventListener("keydown", (ev) => {
    if (ev.target instanceof HTMLInputElement || ev.target instanceof HTMLTextAreaElement) return;
    if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
    const actions = {
      ArrowLeft: () => show(index - 1), ArrowRight: () => show(index + 1),
      Home: () => show(0), End: () => show(last),
    };
    if (ev.key in actions) { stop(); actions[ev.key](); ev.preventDefault(); }
    else if (ev.key === " " && !(ev.target instanceof HTMLButtonElement)) { play(); ev.preventDefault(); }
  });
  show(index);
})();
