"""Backends: how each database enumerates, locks, deletes and scrubs a thread's rows."""
