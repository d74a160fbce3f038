"""fleetmedic timeline: domain types, tables and the store API."""

__version__ = "0.1.0"
