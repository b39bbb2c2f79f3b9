"""fxremat benchmarks (run as ``python -m bench...``); performance claims live here, not in tests."""
