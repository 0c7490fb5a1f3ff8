"""Competitions, pure: the final evaluation's certification and schedule, tournaments, divisions."""
