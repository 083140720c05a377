"""Subqueries: a statement's lookups into another stream's window (Esper "Subqueries")."""
