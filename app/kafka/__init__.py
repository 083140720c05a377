"""Kafka plumbing: a local broker without Docker and its CLI."""
