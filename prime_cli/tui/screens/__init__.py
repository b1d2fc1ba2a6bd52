"""Screens of the TUI: one module each."""
