"""Measurement: benchmark steps, suites and reports, peak memory, and float32-vs-mixed accuracy parity."""
