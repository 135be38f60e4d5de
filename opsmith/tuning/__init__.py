"""Autotuning: ``autotune`` picks the fastest config per tuning key and remembers it in memory and on disk;
``decisions`` writes and reads the decisions as one JSON file, to tune once and ship the result."""
