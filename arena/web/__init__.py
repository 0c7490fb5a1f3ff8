"""Arena's web pages: leaderboards, agents, match replays and payoff heatmaps.

Server-rendered Jinja2 templates (``templates/``) with small vanilla scripts and one
stylesheet (``static/``), all served by the app itself: no CDN, no external fonts.
Include :func:`web_router` in the API app to serve them.
"""

from arena.web.routes import web_router

__all__ = ["web_router"]
