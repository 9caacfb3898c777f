"""The actors of one einmal node, one module each."""
