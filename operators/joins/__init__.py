"""Stream-to-stream joins: data windows per stream, event indexes, lookup plans."""
