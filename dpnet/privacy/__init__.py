"""Privacy core: mechanisms, DP events, the per-run ledger, RDP/PLD accounting, clipping."""
