"""Batched torch cores of the two-player board games (connect four, tictactoe).

The same rules as the numpy cores of :mod:`envs.board_core` (and so as PettingZoo's
``connect_four_v3`` / ``tictactoe_v3``), written as tensor programs that run on
``cpu`` or ``cuda``: legal masks, observation planes, moves, wins, draws and rewards.
``tests/envs/test_device_boards.py`` plays 10,000 random games per game in both and
compares every ply.

The numpy cores act on a list of ``rows``; these act on every row at once under an
``active`` mask instead, because picking rows (``flatnonzero``) makes the host wait
for the device to learn how many there are - a synchronisation per ply on a GPU.
Nothing here calls ``.item()``, ``nonzero`` or anything else that reads a device value
on the host; callers that want to drop finished boards do it when they choose to
(:meth:`TorchBoards.take`).
"""

from __future__ import annotations

from dataclasses import fields

import torch
from torch import nn

from envs.board_core import BoardCore, Boards
from envs.connect_four import ConnectFourCore
from envs.tictactoe import TicTacToeCore


class TorchBoards(Boards[torch.Tensor]):
    """The state of ``n`` boards on one device.

    Attributes:
        cells: ``(n, H * W)`` int8 flat cells (``row * W + col``); 0 empty, ``seat + 1``
            for a seat's piece.
        to_move: ``(n,)`` int64 seat to move.
        done: ``(n,)`` bool, game over.
        winner: ``(n,)`` int64 winning seat, ``-1`` for a draw or not finished.
        plies: ``(n,)`` int64 moves played.
    """

    def take(self, rows: torch.Tensor) -> TorchBoards:
        """The boards of ``rows`` (an index tensor), as a new batch."""
        return TorchBoards(*(getattr(self, f.name)[rows] for f in fields(self)))

    def replace_where(self, cond: torch.Tensor, fresh: TorchBoards) -> None:
        """Rows where ``cond`` is true take ``fresh``'s state (in place; for restarts)."""
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(fresh, f.name)
            c = cond.view(-1, *([1] * (mine.dim() - 1)))
            setattr(self, f.name, torch.where(c, theirs, mine))


class TorchBoardCore:
    """Base class: one numpy core's rules as batched tensor operations.

    Args:
        device: Where the boards live (``"cpu"``, ``"cuda"``, ``torch.device``).
    """

    numpy_core: type[BoardCore] = BoardCore

    def __init__(self, device: str | torch.device = "cpu") -> None:
        ref = self.numpy_core()
        self.device = torch.device(device)
        self.env_id: str = ref.env_id
        self.shape: tuple[int, int] = ref.shape
        self.num_actions: int = ref.num_actions
        self.num_cells = self.shape[0] * self.shape[1]
        # (cells, L, line length): the winning lines through each cell (envs.board_core).
        self._windows = torch.as_tensor(ref.windows_through, device=self.device)
        # Row 3 * seat + cell value: (own piece, opponent's piece) as seen by ``seat``.
        table = [[float(v == s + 1), float(v == 2 - s)] for s in (0, 1) for v in (0, 1, 2)]
        self._plane_table = torch.tensor(table, device=self.device)

    @property
    def obs_shape(self) -> tuple[int, int, int]:
        return (*self.shape, 2)

    def new_boards(self, n: int) -> TorchBoards:
        """``n`` empty boards, seat 0 to move."""
        dev = self.device
        return TorchBoards(
            cells=torch.zeros((n, self.num_cells), dtype=torch.int8, device=dev),
            to_move=torch.zeros(n, dtype=torch.int64, device=dev),
            done=torch.zeros(n, dtype=torch.bool, device=dev),
            winner=torch.full((n,), -1, dtype=torch.int64, device=dev),
            plies=torch.zeros(n, dtype=torch.int64, device=dev),
        )

    def observe(
        self, boards: TorchBoards, dtype: torch.dtype = torch.int8
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Planes ``(n, H, W, 2)`` (own pieces, opponent's) and legal mask ``(n, A)`` of the mover.

        Exactly what PettingZoo's ``observe(agent_selection)`` returns, for every board;
        ``dtype=torch.float32`` gives the planes ready for a network.
        """
        # One lookup per cell: row ``3 * to_move + cell`` of the table is the cell's two planes.
        idx = boards.to_move[:, None] * 3 + boards.cells
        obs = nn.functional.embedding(idx, self._plane_table).view(len(boards), *self.shape, 2)
        return obs.to(dtype), self.legal_mask(boards)

    def legal_mask(self, boards: TorchBoards) -> torch.Tensor:
        """``(n, A)`` bool: the moves PettingZoo allows (finished boards too, like the numpy cores)."""
        raise NotImplementedError

    def target_cells(self, cells: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``(n,)`` flat cell where each row's (legal) action lands."""
        raise NotImplementedError

    def move_targets(self, occupied: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Where every action would land: flat cells ``(k, A)`` and whether it is legal ``(k, A)``.

        Args:
            occupied: ``(k, H * W)`` bool.
        """
        raise NotImplementedError

    def winning_moves(self, own: torch.Tensor, occupied: torch.Tensor) -> torch.Tensor:
        """``(k, A)`` bool: legal actions that complete a line of ``own`` pieces.

        Args:
            own: ``(k, H * W)`` bool, the player's pieces.
            occupied: ``(k, H * W)`` bool, all pieces.
        """
        targets, legal = self.move_targets(occupied)
        targets = targets.clamp(min=0)  # a full column points above the board
        k = len(own)
        lines = self._windows[targets]  # (k, A, L, line length)
        pieces = own.gather(1, lines.view(k, -1)).view(lines.shape)
        pieces = pieces | (lines == targets[..., None, None])
        return pieces.all(-1).any(-1) & legal

    def play(self, boards: TorchBoards, actions: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
        """Play ``actions`` on the ``active`` boards (in place) and advance their turn.

        The caller guarantees that active rows' actions are legal; inactive rows may hold
        anything (``-1``) and are left exactly as they are.

        Returns:
            ``(n,)`` bool: which boards finished with this move.
        """
        n = len(boards)
        act = actions.clamp(0, self.num_actions - 1)
        cell = self.target_cells(boards.cells, act).clamp(0, self.num_cells - 1)[:, None]
        me = (boards.to_move + 1).to(torch.int8)[:, None]
        current = boards.cells.gather(1, cell)
        boards.cells.scatter_(1, cell, torch.where(active[:, None], me, current))
        lines = self._windows[cell[:, 0]]  # (n, L, line length)
        pieces = boards.cells.gather(1, lines.view(n, -1)).view(lines.shape)
        won = (pieces == me[:, :, None]).all(-1).any(-1) & active
        boards.plies += active
        finished = active & (won | (boards.plies >= self.num_cells))
        boards.winner = torch.where(won, boards.to_move, boards.winner)
        boards.done |= finished
        boards.to_move ^= active.to(torch.int64)
        return finished

    @staticmethod
    def rewards(boards: TorchBoards) -> torch.Tensor:
        """PettingZoo's final rewards per seat ``(n, 2)`` float32: +1 win, -1 loss, 0 draw."""
        seats = torch.arange(2, device=boards.winner.device)
        w = boards.winner[:, None]
        return torch.where(w < 0, 0.0, torch.where(w == seats, 1.0, -1.0))


class TorchConnectFour(TorchBoardCore):
    """Connect Four (``connect_four-v3``): a piece drops to the lowest empty row of its column."""

    numpy_core = ConnectFourCore

    def legal_mask(self, boards: TorchBoards) -> torch.Tensor:
        return boards.cells[:, : self.shape[1]] == 0  # the top row

    def target_cells(self, cells: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        rows, cols = self.shape
        column = cells.view(-1, rows, cols).gather(2, actions.view(-1, 1, 1).expand(-1, rows, 1))
        return (rows - 1 - (column != 0).sum((1, 2))) * cols + actions

    def move_targets(self, occupied: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        rows, cols = self.shape
        heights = occupied.view(-1, rows, cols).sum(1)  # (k, cols)
        landing = rows - 1 - heights
        columns = torch.arange(cols, device=occupied.device)
        return landing * cols + columns, heights < rows


class TorchTicTacToe(TorchBoardCore):
    """Tic-Tac-Toe (``tictactoe-v3``): action ``a`` marks flat square ``a``."""

    numpy_core = TicTacToeCore

    def legal_mask(self, boards: TorchBoards) -> torch.Tensor:
        return boards.cells == 0

    def target_cells(self, cells: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return actions

    def move_targets(self, occupied: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        squares = torch.arange(self.num_cells, device=occupied.device)
        return squares.expand(len(occupied), -1), ~occupied


TORCH_BOARD_CORES: dict[str, type[TorchBoardCore]] = {
    "connect_four-v3": TorchConnectFour,
    "tictactoe-v3": TorchTicTacToe,
}


def make_torch_board_core(env_id: str, device: str | torch.device = "cpu") -> TorchBoardCore | None:
    """The torch core of ``env_id`` on ``device``, or ``None`` if it has none."""
    cls = TORCH_BOARD_CORES.get(env_id)
    return None if cls is None else cls(device)
