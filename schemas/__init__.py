"""Data schemas kepl reads at run time: the JSON Schema of statement files
(``statement-file.schema.json``), shipped as package data."""

from pathlib import Path

STATEMENT_FILE_SCHEMA = Path(__file__).with_name("statement-file.schema.json")
"""The JSON Schema a statement file is validated against (``kepl check``)."""
