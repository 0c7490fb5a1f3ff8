/* The play page: a person against an agent, over the connected-agent protocol (v1).
 *
 * This is the protocol's second client (the first is arena/client/connected/client.py); the
 * messages are described in docs/connected.md. The page
 *
 *  1. opens a match: POST /api/v1/agents/{id}/play -> {match_id, human_agent_id, seat,
 *     play_token, ws_path}. A person signed in on the site is rated through the session
 *     cookie (the post carries the page's CSRF token in X-CSRF-Token); signed out, with
 *     "Authorization: Bearer" when the person typed an API token into the page. That
 *     token lives in the input only: never stored (no localStorage, no sessionStorage);
 *  2. connects to ws_path and says hello with the play token, asking for msgpack
 *     (binary frames; arrays arrive as {dtype, shape, data} with little-endian bytes);
 *  3. draws every `request` (the board as the mover sees it: obs[..., 0] are the
 *     person's pieces, obs[..., 1] the agent's), makes the legal moves (mask) clickable,
 *     runs the clock (budget_ms, then the match's overage bank) and sends `answer`
 *     {id, actions: [move]} on a click;
 *  4. shows the `result` of its match with a link to the replay, and the final board.
 *
 * A ping goes out every 20 s (the server closes sockets silent for 60 s). A dropped
 * socket is reopened a few times: within the human clock's grace the server sends the
 * unanswered request again.
 */
"use strict";
(() => {
  const root = document.getElementById("play");
  if (!root) return;

  const PROTOCOL = 1;
  const PING_MS = 20000;
  const RECONNECTS = 5;
  // Close codes after which reconnecting cannot help (arena/connected/protocol.py).
  const FATAL_CLOSES = new Set([4400, 4401, 4403, 4404, 4409]);
  const RPS = ["rock", "paper", "scissors"];

  // Board geometry per env, in display coordinates (row 0 at the top): which obs cell
  // a square shows and which action plays it. Tictactoe's obs is the transpose of how
  // PettingZoo (and the replay page) draws the board: action 3*i + j marks obs cell (i, j).
  const BOARDS = {
    "connect_four-v3": {rows: 6, cols: 7, css: "c4", obsCell: (r, c) => [r, c], action: (r, c) => c},
    "tictactoe-v3": {rows: 3, cols: 3, css: "ttt", obsCell: (r, c) => [c, r], action: (r, c) => 3 * c + r},
  };

  const $ = (id) => document.getElementById(id);
  const env = root.dataset.env;
  const agentName = root.dataset.agentName;
  const api = root.dataset.api;
  const geometry = BOARDS[env] || null;  // null: rock-paper-scissors
  const form = $("play-setup"), tokenInput = $("play-token"), startButton = $("play-start");
  const csrfMeta = document.querySelector('meta[name="csrf-token"]');  // present when signed in
  const statusEl = $("play-status"), clockEl = $("play-clock"), timeEl = $("play-time");
  const area = $("play-board"), resultEl = $("play-result"), outcomeEl = $("play-outcome");

  let game = null;  // the game in progress (see newGame)

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    start().catch((err) => { say(`Could not start: ${err.message}`); startButton.disabled = false; });
  });
  $("play-again").addEventListener("click", () => {
    resultEl.hidden = true;
    form.hidden = false;
    area.replaceChildren();
    say("");
  });
  area.addEventListener("click", (event) => {
    const target = event.target.closest("button[data-action]");
    if (target && !target.disabled) play(Number(target.dataset.action));
  });
  setInterval(tickClock, 200);

  function say(text) { statusEl.textContent = text; }

  function newGame(ticket) {
    return {
      ticket,                    // the POST's answer
      ws: null, pinger: 0, reconnects: 0,
      request: null,             // the request waiting for the person's move
      receivedAt: 0,             // performance.now() when it arrived
      grid: null,                // the board drawn last: grid[r][c] 0 empty, 1 mine, 2 theirs
      myMoves: [], rounds: [],   // rock-paper-scissors: moves played and finished rounds
      done: false,
    };
  }

  // -- 1. open the match --------------------------------------------------------------
  async function start() {
    startButton.disabled = true;
    const token = tokenInput ? tokenInput.value.trim() : "";
    const checked = form.querySelector('input[name="seat"]:checked');
    const seat = checked && checked.value !== "" ? Number(checked.value) : null;
    const headers = {"Content-Type": "application/json"};
    if (token) headers.Authorization = `Bearer ${token}`;
    else if (csrfMeta) headers["X-CSRF-Token"] = csrfMeta.content;
    say("Opening a game…");
    const res = await fetch(`${api}/agents/${root.dataset.agent}/play`, {
      method: "POST", headers, body: JSON.stringify({seat}),
    });
    const body = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error(body.detail || `HTTP ${res.status}`);
    game = newGame(body);
    form.hidden = true;
    startButton.disabled = false;
    resultEl.hidden = true;
    drawEmpty();
    connect(game);
  }

  // -- 2. the socket ------------------------------------------------------------------
  function connect(g) {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${scheme}//${location.host}${g.ticket.ws_path}`);
    ws.binaryType = "arraybuffer";
    g.ws = ws;
    ws.onopen = () => {
      send(g, {type: "hello", protocol: PROTOCOL, token: g.ticket.play_token, encoding: "msgpack", text: false});
      g.pinger = setInterval(() => send(g, {type: "ping"}), PING_MS);
    };
    ws.onmessage = (event) => {
      // Binary frames are msgpack; a refusal before the hello was read may come as JSON text.
      const message = typeof event.data === "string" ? JSON.parse(event.data)
        : MessagePack.decode(new Uint8Array(event.data));
      if (g === game) handle(g, message);
    };
    ws.onclose = (event) => {
      clearInterval(g.pinger);
      if (g !== game || g.done) return;
      if (!FATAL_CLOSES.has(event.code) && g.reconnects < RECONNECTS) {
        g.reconnects += 1;
        say("Connection lost; reconnecting…");
        setTimeout(() => connect(g), 1000 * g.reconnects);
        return;
      }
      stopClock();
      say(`Disconnected (${event.code}${event.reason ? ": " + event.reason : ""}).`);
      resultEl.hidden = false;
      outcomeEl.textContent = "The game could not go on.";
      $("play-replay").href = `/matches/${g.ticket.match_id}`;
    };
  }

  function send(g, message) {
    if (g.ws && g.ws.readyState === WebSocket.OPEN) g.ws.send(MessagePack.encode(message));
  }

  function handle(g, message) {
    switch (message.type) {
      case "welcome":
        g.reconnects = 0;
        say(g.ticket.seat === 0 || !geometry ? "Your move." : `${agentName} moves first…`);
        break;
      case "request": onRequest(g, message); break;
      case "result": onResult(g, message); break;
      case "error": say(`Server: ${message.detail}`); break;
      default: break;  // pong
    }
  }

  // -- 3. a move ----------------------------------------------------------------------
  function onRequest(g, request) {
    const row = request.matches.indexOf(g.ticket.match_id);
    if (row < 0) return;  // another game of the same person: not this page's to answer
    const obs = unpackArray(request.obs), mask = unpackArray(request.mask);
    const legal = rowOf(mask, row).map((v) => v !== 0);
    g.request = {id: request.id, rows: request.matches.length, row, legal,
                 budgetMs: request.budget_ms, bankMs: request.overage_ms[row]};
    g.receivedAt = performance.now();
    if (geometry) {
      drawBoard(g, boardFromObs(obs, row), legal);
    } else {
      const theirLast = rowOf(obs, row)[0];  // 3 (or more): nothing yet
      if (RPS[theirLast] !== undefined && g.myMoves.length > g.rounds.length) {
        g.rounds.push([g.myMoves[g.rounds.length], theirLast]);
      }
      drawRps(g, legal);
    }
    say(`Your move (${agentName} is waiting).`);
    clockEl.hidden = false;
    tickClock();
  }

  function play(action) {
    const g = game;
    if (!g || !g.request || !g.request.legal[action]) return;
    // One action per row; rows of other matches (none in practice) are left unanswered: null.
    const actions = Array.from({length: g.request.rows}, (_, i) => (i === g.request.row ? action : null));
    send(g, {type: "answer", id: g.request.id, actions});
    g.request = null;
    stopClock();
    if (geometry) {
      drawBoard(g, placeMine(g.grid, action), null);
    } else {
      g.myMoves.push(action);
      drawRps(g, null);
    }
    say(`${agentName} is thinking…`);
  }

  // -- 4. the end ---------------------------------------------------------------------
  function onResult(g, result) {
    if (result.match !== g.ticket.match_id) return;
    g.done = true;
    g.request = null;
    stopClock();
    const seat = g.ticket.seat;
    let text = result.winner == null ? "Draw." : result.winner === seat ? "You won!" : "You lost.";
    if (!geometry) text += " " + rpsSummary(g, result);
    if (result.termination !== "normal") {
      text += ` The game ended by ${result.termination}${result.detail ? ": " + result.detail : ""}.`;
    }
    outcomeEl.textContent = text;
    outcomeEl.className = "strong " + (result.winner == null ? "" : result.winner === seat ? "won" : "lost");
    $("play-replay").href = `/matches/${result.match}`;
    resultEl.hidden = false;
    say("Game over.");
    if (geometry) drawFinalBoard(g, result.match);
    else drawRps(g, null);
    g.ws.close(1000, "game over");
  }

  // Rock-paper-scissors: no request follows the last round, but the person's score (the
  // sum of +1 / 0 / -1 over the rounds) tells how it went, and so what the agent played.
  function rpsSummary(g, result) {
    const outcome = (mine, theirs) => (mine === theirs ? 0 : (mine - theirs + 3) % 3 === 1 ? 1 : -1);
    const sofar = g.rounds.reduce((sum, [mine, theirs]) => sum + outcome(mine, theirs), 0);
    const last = Math.round(result.scores[g.ticket.seat]) - sofar;
    if (result.termination === "normal" && g.myMoves.length > g.rounds.length && Math.abs(last) <= 1) {
      const mine = g.myMoves[g.rounds.length];
      // The agent's move: mine (a draw), the one mine beats (a win), the one beating mine (a loss).
      g.rounds.push([mine, last === 0 ? mine : last === 1 ? (mine + 2) % 3 : (mine + 1) % 3]);
    }
    const won = g.rounds.filter(([m, t]) => outcome(m, t) === 1).length;
    const lost = g.rounds.filter(([m, t]) => outcome(m, t) === -1).length;
    return `Rounds won: you ${won}, ${agentName} ${lost} (${g.rounds.length - won - lost} drawn).`;
  }

  // The last position comes from the recorded match (re-simulated by the server): the
  // protocol sends no request after the final move. It is recorded just after the result.
  async function drawFinalBoard(g, matchId, tries = 20) {
    for (let i = 0; i < tries && g === game; i++) {
      const res = await fetch(`${api}/matches/${matchId}/frames`);
      if (res.ok) {
        const data = await res.json();
        if (data.kind !== "board") return;
        const last = data.frames[data.frames.length - 1];
        const mine = g.ticket.seat + 1;
        drawBoard(g, last.map((line) => line.map((v) => (v === 0 ? 0 : v === mine ? 1 : 2))), null);
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }

  // -- the protocol's arrays ------------------------------------------------------------
  const TYPED = {
    i1: Int8Array, u1: Uint8Array, i2: Int16Array, u2: Uint16Array, i4: Int32Array, u4: Uint32Array,
    i8: BigInt64Array, u8: BigUint64Array, f4: Float32Array, f8: Float64Array,
  };

  // {dtype, shape, data} -> {shape, values: flat Numbers}. The bytes are little-endian,
  // as are typed arrays on every platform browsers run on; slice() copies them to an
  // aligned buffer (a typed array view must start at a multiple of its element size).
  function unpackArray(array) {
    const Type = TYPED[array.dtype];
    if (!Type) throw new Error(`unsupported dtype ${array.dtype}`);
    return {shape: array.shape, values: Array.from(new Type(array.data.slice().buffer), Number)};
  }

  function rowOf(array, row) {
    const size = array.shape.slice(1).reduce((a, b) => a * b, 1);
    return array.values.slice(row * size, (row + 1) * size);
  }

  // The display grid (0 empty, 1 mine, 2 theirs) of one row of a (k, H, W, 2) obs.
  function boardFromObs(obs, row) {
    const [, , width] = obs.shape;
    const cells = rowOf(obs, row);
    const at = (i, j, plane) => cells[(i * width + j) * 2 + plane];
    return grid((r, c) => {
      const [i, j] = geometry.obsCell(r, c);
      return at(i, j, 0) ? 1 : at(i, j, 1) ? 2 : 0;
    });
  }

  function grid(fill) {
    return Array.from({length: geometry.rows}, (_, r) => Array.from({length: geometry.cols}, (_, c) => fill(r, c)));
  }

  // The grid after the person's move (shown until the agent answers).
  function placeMine(before, action) {
    const after = before.map((line) => line.slice());
    for (let r = geometry.rows - 1; r >= 0; r--) {  // connect four: the lowest empty cell
      for (let c = 0; c < geometry.cols; c++) {
        if (geometry.action(r, c) === action && after[r][c] === 0) {
          after[r][c] = 1;
          return after;
        }
      }
    }
    return after;
  }

  // -- drawing ------------------------------------------------------------------------
  function drawEmpty() {
    if (geometry) drawBoard(game, grid(() => 0), null);
    else drawRps(game, null);
  }

  // Squares are buttons: enabled where the move is legal (legal null: not the person's turn).
  // The agent's newest pieces (not on the previous grid) are marked "last".
  function drawBoard(g, next, legal) {
    const seat = g.ticket.seat;
    const pieceClass = ["", `p${seat + 1}`, `p${2 - seat}`];
    const board = document.createElement("div");
    board.className = `board ${geometry.css}`;
    board.style.setProperty("--cols", geometry.cols);
    for (let r = 0; r < geometry.rows; r++) {
      for (let c = 0; c < geometry.cols; c++) {
        const cell = document.createElement("button");
        const action = geometry.action(r, c);
        const open = legal !== null && legal[action] && next[r][c] === 0;
        const fresh = next[r][c] === 2 && g.grid && g.grid[r][c] !== 2;
        cell.type = "button";
        cell.className = `cell ${pieceClass[next[r][c]]}` + (open ? " legal" : "") + (fresh ? " last" : "");
        cell.dataset.action = action;
        cell.dataset.row = r;
        cell.dataset.col = c;
        cell.disabled = !open;
        cell.setAttribute("aria-label", `row ${r + 1}, column ${c + 1}: ` +
          ["empty", "you", agentName][next[r][c]] + (open ? " (play here)" : ""));
        board.append(cell);
      }
    }
    const who = document.createElement("p");
    who.className = "who small" + (geometry.css === "ttt" ? " seats-ttt" : "");  // as the replay page colours them
    who.innerHTML = `<span class="swatch seat-${seat}"></span> you · <span class="swatch seat-${1 - seat}"></span> `;
    who.append(agentName);
    area.replaceChildren(board, who);
    g.grid = next;
  }

  function drawRps(g, legal) {
    const moves = document.createElement("div");
    moves.className = "rps-moves";
    RPS.forEach((name, action) => {
      const button = document.createElement("button");
      button.type = "button";
      button.dataset.action = action;
      button.textContent = name;
      button.disabled = !(legal && legal[action]);
      if (!button.disabled) button.classList.add("legal");
      moves.append(button);
    });
    const beats = (a, b) => (a - b + 3) % 3 === 1;  // paper beats rock, scissors paper, rock scissors
    const list = document.createElement("ol");
    list.className = "rps-rounds small";
    for (const [mine, theirs] of g.rounds) {
      const item = document.createElement("li");
      const outcome = mine === theirs ? "draw" : beats(mine, theirs) ? "you win" : `${agentName} wins`;
      item.textContent = `you ${RPS[mine]}, ${agentName} ${RPS[theirs]}: ${outcome}`;
      list.append(item);
    }
    if (g.myMoves.length > g.rounds.length) {
      const item = document.createElement("li");
      item.textContent = `you ${RPS[g.myMoves[g.myMoves.length - 1]]}, ${agentName} …`;
      list.append(item);
    }
    area.replaceChildren(moves, list);
  }

  // -- the clock ----------------------------------------------------------------------
  // The move's budget counts down first, then the match's overage bank (a minute a move,
  // five minutes in reserve for the whole game at the human clock).
  function tickClock() {
    const g = game;
    if (!g || !g.request) return;
    const left = g.request.budgetMs - (performance.now() - g.receivedAt);
    const reserve = g.request.bankMs + Math.min(0, left);
    timeEl.textContent = left > 0 ? `${seconds(left)} (+ ${seconds(reserve)} in reserve)`
      : `${seconds(Math.max(0, reserve))} in reserve`;
    clockEl.classList.toggle("low", left < 10000);
  }

  function stopClock() { clockEl.hidden = true; }

  function seconds(ms) {
    const s = Math.ceil(ms / 1000);
    return s >= 60 ? `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}` : `${s} s`;
  }
})();
