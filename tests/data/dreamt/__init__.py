"""Seeded tiny raw-data fixtures."""
