"""Derived-value windows of 001 §14.4: size, uni, linest, correl, weighted_avg."""
