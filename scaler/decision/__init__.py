"""What to do: the trigger's metadata, the decision, the budget and drift. Pure logic, no I/O."""
