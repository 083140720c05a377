"""The local schema registry kepl starts for Avro topics (``kepl registry``)."""
