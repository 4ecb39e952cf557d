"""Benchmarks: the hub against a raw ``websockets`` broadcast server (``make bench``)."""
