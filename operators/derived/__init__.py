"""Derived-value windows of Esper ref. 14.4: size, uni, linest, correl, weighted_avg."""
