"""Alerts: one base, one module per sink, routing, the deliveries table, fake receivers."""
