"""The local backend's process machinery: a supervisor that starts, logs, restarts and stops
process trees; fork servers; the runner of terminal backends (tmux); pre-launch checks.
"""
