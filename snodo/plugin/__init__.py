"""The plugin host (pluggy) and the interface plugins implement: hookspecs, records, planning."""
