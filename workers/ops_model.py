"""Model loading commands (filled in by the loader work)."""
