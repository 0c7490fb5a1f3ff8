"""Arena's web pages: leaderboards, agents, match replays and payoff heatmaps.

Server-rendered Jinja2 templates (``templates/``) with small vanilla scripts and one
stylesheet (``static/``), all served by the app itself: no CDN, no external fonts.
:func:`arena.web.routes.web_router` returns the router the API app includes.
"""
