"""Offline evaluation: trace readers, the replay of a policy, the yardstick, backtests, the demo."""
