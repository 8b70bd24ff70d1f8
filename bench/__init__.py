"""Benchmarks (not tests): each prints figures beside a baseline measured in the same run."""
